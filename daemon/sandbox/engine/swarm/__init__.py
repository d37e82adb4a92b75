"""Sandboxes on a Docker Swarm (SERVICE_ENGINE=swarm).

- `settings`: where the swarm is (manager, node engines, images by digest), from SERVICE_SWARM_*.
- `driver.SwarmDriver`: the `SandboxDriver` on the swarm: services on overlays, exec and files on
  the node running each task, capacity for the scheduler, reaping across nodes.
"""
