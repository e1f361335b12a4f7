"""qpid-dispatch's own system tests, run with hopd as qdrouterd.

See docs/compatibility.md#qdrouterds-own-system-tests.
"""
