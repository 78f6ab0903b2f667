"""Runs replayed offline from their model cassettes (issue 31, item 5): `offline` re-runs a
recorded run against what its model answered, with no model and no network."""
