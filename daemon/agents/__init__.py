"""Agent snapshots: the content-addressed bundle store (see ``store.py``)."""
from daemon.agents.store import (  # noqa: F401
    BundleError,
    Snapshot,
    SnapshotAuth,
    SnapshotMetadata,
    SnapshotStore,
    get_store,
    inspect_bundle,
)
