"""Tuned kernel configurations, one JSON file per device key (package data)."""
