"""What every other package of the agent leans on, importing none of them: the guard and the one wrapper maker, the
process's identity and kinds, helper threads, ids, the sys.monitoring tool, the patch table and the vocabulary
derived from it, per-span slots and the ledger of this process's ended spans."""
