"""A start in progress: its open phase stack, progress records, in-progress series and the opt-in status endpoint."""
