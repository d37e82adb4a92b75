"""Reusable widgets of the svc TUI."""
