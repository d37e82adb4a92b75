"""Alerts and behaviors: metric rules evaluated after each experiment, behavior breach latches, and
the durable outbox whose worker delivers every notification (webhook, chat block message, chat bot, email)."""
