"""`svc setup`: seven idempotent phases that wire a project and its editor agents to svc.

Each phase plans a list of file changes (`Change`), the command shows them as diffs, then applies
them (unless --dry-run). A phase with nothing to change reports "no change", so a second run is quiet."""
