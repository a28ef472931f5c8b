"""Patching vLLM: the one declarative table of patch points, its lazy resolution into wrapt wrappers, one small
builder per hook kind, and the guard every step of ours runs under."""
