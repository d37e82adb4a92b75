"""Team chat (Slack): install flow, signed events, the investigation bot and chat alerts."""
