"""Verdicts from what was checked: stop conditions, test counts, fingerprints, turn integrity."""
