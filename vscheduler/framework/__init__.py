"""Sessions, statements and the rules that combine plugins\x27 answers."""
