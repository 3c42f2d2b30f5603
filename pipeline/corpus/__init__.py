"""The corpus: planning inputs into ranges, the readers of each format, the records they yield, the read stage."""
