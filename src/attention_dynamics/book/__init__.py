"""The book's machinery: the runner and its command line, the ledger commands, the stored-result runner, the
notebooks as files and their comparison, the chapters' fingerprints, the launch notebooks, the nbval plugin, the PDF."""
