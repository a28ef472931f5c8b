"""The offline model of a recorded start, standard library only: spans, facts, the critical path, advice and
the printed summary. The agent (printout at ready) and the command line both use it."""
