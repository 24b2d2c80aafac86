"""The claims ledger, the verdict rules that decide the paper's claims from it, and the stored results' declarations."""
