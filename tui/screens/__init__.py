"""The screens of the svc TUI."""
