"""The command line: sources (files, Tempo), report, compare, predict, the waterfall and its canvas."""
