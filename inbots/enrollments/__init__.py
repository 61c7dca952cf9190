"""Enrolment tokens: the operator hands one out, and an agent registers itself with it."""
