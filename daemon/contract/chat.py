"""Team chat (Slack): install URL, OAuth callback, Events API envelopes, status."""
from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from daemon.contract.common import Query, Request, Response


class InstallUrl(Response):
    url: str = Field(description="the Slack authorize URL: client id, bot scopes and a signed, single-use, 15-minute state")
    expires_at: str


class CallbackQuery(Query):
    code: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]{1,256}$", description="OAuth code (absent when the user declined)")
    state: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,1024}$", description="the state of the install URL")
    error: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,100}$", description="set by Slack when the user declined")


class InstalledQuery(Query):
    chat: str | None = Field(default=None, pattern=r"^[a-z_]{1,20}$")
    team: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")


class EventEnvelope(Request):
    """What Slack posts (Events API): `url_verification` {challenge} or `event_callback` {team_id,
    event_id, event: {type: app_mention, user, text, ts, channel, thread_ts?}}. Slack adds fields
    over time, so other keys are accepted; the raw body is what the signature covers."""
    model_config = ConfigDict(extra="allow")
    type: str = Field(max_length=64)
    challenge: str | None = Field(default=None, max_length=256)
    team_id: str | None = Field(default=None, max_length=64)
    event_id: str | None = Field(default=None, max_length=128)
    event: dict[str, Any] | None = None


MAX_INTERACTION_CHARS = 48 * 1024  # a click's payload carries the clicked message (the alert: ~20 KB at most)


class InteractionForm(Request):
    """What Slack posts (form-encoded) when someone clicks a button of the bot's messages."""
    payload: str = Field(max_length=MAX_INTERACTION_CHARS, description="the `block_actions` payload as JSON: team, channel, container "
                                                             "(message_ts), message, actions [{action_id, value}]")


class EventAck(Response):
    ok: bool | None = Field(default=None, description="an event_callback was accepted (processed in the background)")
    challenge: str | None = Field(default=None, description="url_verification: the challenge echoed")


class Installation(Response):
    team_id: str
    team_name: str | None
    app_id: str | None
    bot_user_id: str | None
    scope: str | None
    installed_at: str
    updated_at: str
    last_event_at: str | None
    bot_ok: bool = Field(description="Slack's auth.test accepts the stored bot token now")
    bot_error: str | None = Field(description="Slack's error code when it does not (e.g. invalid_auth, token_revoked)")


class ChatStatus(Response):
    installations: list[Installation] = Field(description="this tenant's workspaces (bot tokens are never shown)")
    oauth_configured: bool = Field(description="SERVICE_CHAT_CLIENT_ID and SERVICE_CHAT_CLIENT_SECRET are set")
    events_configured: bool = Field(description="SERVICE_CHAT_SIGNING_SECRET is set")
    server_bot_token: bool = Field(description="SERVICE_CHAT_BOT_TOKEN is set and posts this tenant's chat alerts without an installation "
                                               "(only for the tenant SERVICE_CHAT_BOT_TENANT names; default the admin tenant)")
    agent_configured: bool = Field(description="the investigation agent has a model (SERVICE_LLM_*)")
    last_event_at: str | None
