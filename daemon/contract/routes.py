"""The route table: every operation of the svc HTTP API declared once, here (method, path template,
request body, query and answer models, success status, stream kind).

The daemon binds one handler to each entry (`@routes.get(R.GET_RUN, "summary")` in daemon/api/*.py;
`daemon.app` refuses to start when an entry has no handler, or two, or a handler is bound to a path
that is not here) and generates its OpenAPI document from these entries; every client (the CLI, the
TUI, the MCP server, the eval flow) calls them through `Client.call(R.GET_RUN, run_id=...)`, so a
path is written nowhere else.

Models are named by reference ("runs:Run" is daemon.contract.runs.Run) and imported when first
asked for (`route.answer_model`), so importing this table costs nothing but itself (no pydantic): a
client that only sends requests never loads a schema it does not use.
"""
from __future__ import annotations

import re
from typing import Any, NamedTuple

ModelRef = Any  # "module:Name" under daemon.contract, or the model class itself

_PARAM = re.compile(r"\{(\w+)(?::([^}]*))?\}")


_RESOLVED: dict[str, Any] = {}


def resolve(ref: ModelRef) -> Any:
    """The model a reference names (a class is returned as it is)."""
    if ref is None or not isinstance(ref, str):
        return ref
    if ref not in _RESOLVED:
        module, _, name = ref.partition(":")
        _RESOLVED[ref] = getattr(__import__(f"daemon.contract.{module}", fromlist=[name]), name)
    return _RESOLVED[ref]


def quote(value: str, safe: str = "") -> str:
    """Percent-encode everything but RFC 3986's unreserved characters (and `safe`)."""
    keep = re.escape(safe)
    return re.sub(f"[^A-Za-z0-9_.~{keep}-]", lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), value)


class Route(NamedTuple):
    """One operation. Immutable; compared by identity where it matters (one constant per route)."""

    name: str
    method: str
    path: str  # aiohttp template: {param} or {param:regex}
    body: ModelRef = None
    query: ModelRef = None
    answer: ModelRef = None  # the item model when paginated
    status: int = 200
    paginated: bool = False
    stream: str | None = None  # "text/event-stream" or "application/x-ndjson"
    events: ModelRef = None  # a stream's item model
    content_types: tuple[str, ...] = ("application/json",)
    body_optional: bool = False  # the body may be left out (it is then the body model's defaults)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def params(self) -> tuple[str, ...]:
        """The path parameters, in order."""
        return tuple(m.group(1) for m in _PARAM.finditer(self.path))

    def url(self, **params: Any) -> str:
        """The path with every parameter filled in (percent-encoded; a `{name:.*}` one keeps its slashes)."""
        missing = [p for p in self.params if params.get(p) in (None, "")]
        extra = sorted(set(params) - set(self.params))
        if missing or extra:
            raise TypeError(f"{self.name} ({self.method} {self.path}) takes path parameters {list(self.params)}; "
                            f"missing {missing}, unknown {extra}")

        def fill(match: re.Match[str]) -> str:
            return quote(str(params[match.group(1)]), safe="/" if match.group(2) else "")

        return _PARAM.sub(fill, self.path)

    @property
    def body_model(self) -> Any:
        return resolve(self.body)

    @property
    def query_model(self) -> Any:
        return resolve(self.query)

    @property
    def item_model(self) -> Any:
        return resolve(self.answer)

    @property
    def answer_model(self) -> Any:
        """What a 2xx JSON answer validates against (Page[item] when paginated)."""
        item = resolve(self.answer)
        if item is None or not self.paginated:
            return item
        from daemon.contract.common import Page

        return Page[item]  # type: ignore[valid-type]

    @property
    def event_model(self) -> Any:
        return resolve(self.events)


SSE = "text/event-stream"
NDJSON = "application/x-ndjson"
PROTOBUF = "application/x-protobuf"
SPEC_CONTENT_TYPES = ("application/json", "application/x-yaml", "text/yaml", "application/yaml", "text/x-yaml")

# --- agents ------------------------------------------------------------------------------------------
UPLOAD_AGENT = Route("upload_agent", "POST", "/v1/agents", body="agents:SnapshotUploadForm", answer="agents:Snapshot", status=201, content_types=("multipart/form-data",))
LIST_AGENTS = Route("list_agents", "GET", "/v1/agents", query="common:PageQuery", answer="agents:Snapshot", paginated=True)
AGENT_LATEST = Route("agent_latest", "GET", "/v1/agents/{name}/latest", answer="agents:Snapshot")
AGENT_BY_TAG = Route("agent_by_tag", "GET", "/v1/agents/{name}/tags/{tag}", answer="agents:Snapshot")
AGENT_BY_VERSION = Route("agent_by_version", "GET", "/v1/agents/{name}/versions/{version}", answer="agents:Snapshot")
AGENT_VERSIONS = Route("agent_versions", "GET", "/v1/agents/{name}/versions", query="common:PageQuery", answer="agents:Snapshot", paginated=True)
GET_SNAPSHOT = Route("get_snapshot", "GET", "/v1/snapshots/{snapshot_id}", answer="agents:Snapshot")
DELETE_SNAPSHOT = Route("delete_snapshot", "DELETE", "/v1/snapshots/{snapshot_id}", status=204)

# --- alerts ------------------------------------------------------------------------------------------
CREATE_ALERT = Route("create_alert", "POST", "/v1/alerts", body="alerts:AlertCreate", answer="alerts:AlertRule", status=201)
LIST_ALERTS = Route("list_alerts", "GET", "/v1/alerts", query="alerts:AlertListQuery", answer="alerts:AlertRule", paginated=True)
GET_ALERT_DEFAULT_ROUTE = Route("get_alert_default_route", "GET", "/v1/alerts/default-route", answer="alerts:DefaultRoute")
PUT_ALERT_DEFAULT_ROUTE = Route("put_alert_default_route", "PUT", "/v1/alerts/default-route", body="alerts:DefaultRoutePut", answer="alerts:DefaultRoute")
DELETE_ALERT_DEFAULT_ROUTE = Route("delete_alert_default_route", "DELETE", "/v1/alerts/default-route", status=204)
GET_ALERT = Route("get_alert", "GET", "/v1/alerts/{alert_id}", answer="alerts:AlertRule")
DELETE_ALERT = Route("delete_alert", "DELETE", "/v1/alerts/{alert_id}", status=204)
ROTATE_ALERT_SECRET = Route("rotate_alert_secret", "POST", "/v1/alerts/{alert_id}/secret", answer="alerts:AlertRule")
LIST_ALERT_DELIVERIES = Route("list_alert_deliveries", "GET", "/v1/alerts/{alert_id}/deliveries", query="common:PageQuery", answer="alerts:AlertDelivery", paginated=True)
TEST_ALERT = Route("test_alert", "POST", "/v1/alerts/{alert_id}/test", answer="alerts:AlertTestAccepted", status=202)

# --- behaviors ---------------------------------------------------------------------------------------
CREATE_BEHAVIOR = Route("create_behavior", "POST", "/v1/behaviors", body="behaviors:BehaviorCreate", answer="behaviors:Behavior", status=201)
LIST_BEHAVIORS = Route("list_behaviors", "GET", "/v1/behaviors", query="common:PageQuery", answer="behaviors:Behavior", paginated=True)
GET_BEHAVIOR = Route("get_behavior", "GET", "/v1/behaviors/{behavior_id}", answer="behaviors:Behavior")
DELETE_BEHAVIOR = Route("delete_behavior", "DELETE", "/v1/behaviors/{behavior_id}", status=204)
POST_VERDICTS = Route("post_verdicts", "POST", "/v1/behaviors/{behavior_id}/verdicts", body="behaviors:VerdictsPost", answer="behaviors:VerdictsAccepted", status=201)
BEHAVIOR_STATS = Route("behavior_stats", "GET", "/v1/behaviors/{behavior_id}/stats", answer="behaviors:BehaviorStats")
BEHAVIOR_DELIVERIES = Route("behavior_deliveries", "GET", "/v1/behaviors/{behavior_id}/deliveries", query="common:PageQuery", answer="alerts:AlertDelivery", paginated=True)

# --- chat --------------------------------------------------------------------------------------------
CHAT_INSTALL_URL = Route("chat_install_url", "GET", "/v1/chat/install-url", answer="chat:InstallUrl")
CHAT_OAUTH_CALLBACK = Route("chat_oauth_callback", "GET", "/v1/chat/oauth/callback", query="chat:CallbackQuery", status=302)
CHAT_INSTALLED = Route("chat_installed", "GET", "/v1/chat/installed", query="chat:InstalledQuery")
CHAT_EVENTS = Route("chat_events", "POST", "/v1/chat/events", body="chat:EventEnvelope", answer="chat:EventAck")
CHAT_INTERACTIONS = Route("chat_interactions", "POST", "/v1/chat/interactions", body="chat:InteractionForm", answer="chat:EventAck", content_types=("application/x-www-form-urlencoded",))
CHAT_STATUS = Route("chat_status", "GET", "/v1/chat/status", answer="chat:ChatStatus")

# --- conversations -----------------------------------------------------------------------------------
CREATE_CONVERSATION = Route("create_conversation", "POST", "/v1/conversations", body="conversations:ConversationCreate", answer="conversations:Conversation", status=201)
LIST_CONVERSATIONS = Route("list_conversations", "GET", "/v1/conversations", query="common:PageQuery", answer="conversations:Conversation", paginated=True)
GET_CONVERSATION = Route("get_conversation", "GET", "/v1/conversations/{conversation_id}", answer="conversations:Conversation")
POST_MESSAGE = Route("post_message", "POST", "/v1/conversations/{conversation_id}/messages", body="conversations:MessageCreate", answer="conversations:MessageReply", status=201)

# --- datasets ----------------------------------------------------------------------------------------
CREATE_DATASET = Route("create_dataset", "POST", "/v1/datasets", body="datasets:DatasetCreate", answer="datasets:Dataset", status=201)
LIST_DATASETS = Route("list_datasets", "GET", "/v1/datasets", query="common:PageQuery", answer="datasets:Dataset", paginated=True)
GET_DATASET = Route("get_dataset", "GET", "/v1/datasets/{dataset_id}", answer="datasets:Dataset")
LIST_DATASET_VERSIONS = Route("list_dataset_versions", "GET", "/v1/datasets/{dataset_id}/versions", query="common:PageQuery", answer="datasets:DatasetVersion", paginated=True)
DELETE_DATASET = Route("delete_dataset", "DELETE", "/v1/datasets/{dataset_id}", status=204)
ADD_DATASET_RECORDS = Route("add_dataset_records", "POST", "/v1/datasets/{dataset_id}/records", body="datasets:RecordBatch", answer="datasets:RecordsAdded", status=201)
LIST_DATASET_RECORDS = Route("list_dataset_records", "GET", "/v1/datasets/{dataset_id}/records", query="datasets:RecordQuery", answer="datasets:Record", paginated=True)
DIFF_DATASET_VERSIONS = Route("diff_dataset_versions", "GET", "/v1/datasets/{dataset_id}/diff", query="datasets:DiffQuery", answer="datasets:DatasetDiff")

# --- experiments -------------------------------------------------------------------------------------
CREATE_EXPERIMENT = Route("create_experiment", "POST", "/v1/experiments", body="experiments:ExperimentCreate", answer="experiments:ExperimentRecord", status=201)
LIST_EXPERIMENTS = Route("list_experiments", "GET", "/v1/experiments", query="experiments:ExperimentListQuery", answer="experiments:ExperimentRecord", paginated=True)
GET_EXPERIMENT = Route("get_experiment", "GET", "/v1/experiments/{experiment_id}", answer="experiments:RunResults")
RUN_EXPERIMENT = Route("run_experiment", "POST", "/v1/experiments/{experiment_id}/run", body="experiments:ExperimentRun", answer="experiments:ExperimentRunAccepted", status=202, body_optional=True)
CANCEL_EXPERIMENT = Route("cancel_experiment", "POST", "/v1/experiments/{experiment_id}/cancel", answer="experiments:ExperimentRecord")
STREAM_EXPERIMENT = Route("stream_experiment", "GET", "/v1/experiments/{experiment_id}/stream", stream=SSE, events="experiments:ExperimentEvent")
LIST_SCENARIOS = Route("list_scenarios", "GET", "/v1/scenarios", query="experiments:ScenarioListQuery", answer="experiments:ScenarioResult", paginated=True)
GET_EXPERIMENT_METRICS = Route("get_experiment_metrics", "GET", "/v1/metrics/experiments/{experiment_id}", answer="experiments:ExperimentMetrics")
COMPARE_EXPERIMENTS = Route("compare_experiments", "POST", "/v1/experiments/compare", body="experiments:CompareRequest", answer="experiments:ComparisonResult")
IMPORT_EXPERIMENT = Route("import_experiment", "POST", "/v1/experiments/import", body="experiments:BaselineBundle", answer="experiments:RunResults", status=201)
EXTEND_EXPERIMENT = Route("extend_experiment", "POST", "/v1/experiments/{experiment_id}/extend", body="experiments:ExperimentExtend", answer="experiments:ExperimentExtended", status=202)
EVAL_HISTORY = Route("eval_history", "GET", "/v1/evals/{spec_id}/history", query="experiments:HistoryQuery", answer="experiments:HistoryItem", paginated=True)
EXPORT_EXPERIMENT = Route("export_experiment", "GET", "/v1/experiments/{experiment_id}/export", query="experiments:ExportQuery", stream=NDJSON)

# --- health ------------------------------------------------------------------------------------------
HEALTH = Route("health", "GET", "/health", answer="common:Health")
HEALTH_V1 = Route("health_v1", "GET", "/v1/health", answer="common:Health")
GET_OPENAPI = Route("get_openapi", "GET", "/v1/openapi.json")

# --- judges ------------------------------------------------------------------------------------------
CREATE_JUDGE = Route("create_judge", "POST", "/v1/judges", body="judges:JudgeCreate", answer="judges:Judge", status=201)
LIST_JUDGES = Route("list_judges", "GET", "/v1/judges", query="common:PageQuery", answer="judges:Judge", paginated=True)
GET_JUDGE = Route("get_judge", "GET", "/v1/judges/{judge_id}", answer="judges:Judge")
DELETE_JUDGE = Route("delete_judge", "DELETE", "/v1/judges/{judge_id}", status=204)
EVAL_JUDGE = Route("eval_judge", "POST", "/v1/judges/{judge_id}/eval", body="judges:JudgeEvalRequest", query="judges:JudgeEvalQuery", answer="judges:JudgeVerdict")
CALIBRATE_JUDGE = Route("calibrate_judge", "POST", "/v1/judges/{judge_id}/calibrate", body="judges:CalibrateRequest", query="judges:JudgeEvalQuery", answer="judges:Calibration")

# --- keys --------------------------------------------------------------------------------------------
CREATE_KEY = Route("create_key", "POST", "/v1/keys", body="keys:KeyCreate", answer="keys:KeyWithSecret", status=201)
LIST_KEYS = Route("list_keys", "GET", "/v1/keys", query="common:PageQuery", answer="keys:Key", paginated=True)
ROTATE_KEY = Route("rotate_key", "POST", "/v1/keys/{key_id}/rotate", answer="keys:KeyWithSecret")
DELETE_KEY = Route("delete_key", "DELETE", "/v1/keys/{key_id}", status=204)
CREATE_TENANT = Route("create_tenant", "POST", "/v1/tenants", body="keys:TenantCreate", answer="keys:TenantCreated", status=201)

# --- replicas ----------------------------------------------------------------------------------------
CREATE_REPLICAS = Route("create_replicas", "POST", "/v1/replicas", body="replicas:ReplicaSuiteCreate", answer="replicas:ReplicaSuite", status=202)
GET_REPLICAS = Route("get_replicas", "GET", "/v1/replicas/{suite_id}", answer="replicas:ReplicaSuite")
STREAM_REPLICAS = Route("stream_replicas", "GET", "/v1/replicas/{suite_id}/stream", stream=SSE, events="replicas:ReplicaEvent")

# --- runs --------------------------------------------------------------------------------------------
CREATE_RUN = Route("create_run", "POST", "/v1/runs", body="runs:RunCreate", answer="runs:Run", status=202)
LIST_RUNS = Route("list_runs", "GET", "/v1/runs", query="runs:RunListQuery", answer="runs:Run", paginated=True)
GET_RUN = Route("get_run", "GET", "/v1/runs/{run_id}", answer="runs:Run")
REPLAY_RUN = Route("replay_run", "POST", "/v1/runs/{run_id}/replay", body="runs:ReplayBody", query="runs:ReplayQuery", answer="runs:Run", status=202, body_optional=True)
CANCEL_RUN = Route("cancel_run", "POST", "/v1/runs/{run_id}/cancel", answer="runs:Run")
STREAM_RUN = Route("stream_run", "GET", "/v1/runs/{run_id}/stream", stream=SSE, events="runs:RunEvent")
GET_RUN_TRAJECTORY = Route("get_run_trajectory", "GET", "/v1/runs/{run_id}/trajectory", query="runs:TrajectoryQuery")
GET_RUN_EFFECTS = Route("get_run_effects", "GET", "/v1/runs/{run_id}/effects", answer="effects:RunEffects")
DIFF_RUN_EFFECTS = Route("diff_run_effects", "GET", "/v1/runs/{run_id}/effects/diff", query="effects:EffectsDiffQuery", answer="effects:EffectsDiff")

# --- sandboxes ---------------------------------------------------------------------------------------
CREATE_SANDBOX = Route("create_sandbox", "POST", "/v1/sandboxes", body="sandboxes:SandboxCreate", answer="sandboxes:Sandbox", status=201)
LIST_SANDBOXES = Route("list_sandboxes", "GET", "/v1/sandboxes", query="sandboxes:SandboxListQuery", answer="sandboxes:Sandbox", paginated=True)
GET_SANDBOX = Route("get_sandbox", "GET", "/v1/sandboxes/{sandbox_id}", answer="sandboxes:Sandbox")
DELETE_SANDBOX = Route("delete_sandbox", "DELETE", "/v1/sandboxes/{sandbox_id}", status=204)
RUN_SANDBOX_COMMAND = Route("run_sandbox_command", "POST", "/v1/sandboxes/{sandbox_id}/commands", body="sandboxes:CommandRequest", answer="sandboxes:CommandResult")
WRITE_SANDBOX_FILE = Route("write_sandbox_file", "POST", "/v1/sandboxes/{sandbox_id}/files", body="sandboxes:FileWrite", answer="sandboxes:FileInfo", status=201)
READ_SANDBOX_FILE = Route("read_sandbox_file", "GET", "/v1/sandboxes/{sandbox_id}/files/{path:.*}")
DELETE_SANDBOX_FILE = Route("delete_sandbox_file", "DELETE", "/v1/sandboxes/{sandbox_id}/files/{path:.*}", status=204)
SANDBOX_STATE = Route("sandbox_state", "GET", "/v1/sandboxes/{sandbox_id}/state", answer="sandboxes:WorkspaceState")
SANDBOX_DIFF = Route("sandbox_diff", "GET", "/v1/sandboxes/{sandbox_id}/diff", answer="sandboxes:WorkspaceDiff")
SET_SANDBOX_TIMEOUT = Route("set_sandbox_timeout", "POST", "/v1/sandboxes/{sandbox_id}/timeout", body="sandboxes:TimeoutRequest", answer="sandboxes:Sandbox")
LIST_NODES = Route("list_nodes", "GET", "/v1/nodes", answer="sandboxes:NodeList")
SANDBOX_EVENTS = Route("sandbox_events", "GET", "/v1/sandboxes/{sandbox_id}/events", stream=SSE, events="sandboxes:SandboxEvent")

# --- scores ------------------------------------------------------------------------------------------
CREATE_SCORE_RULE = Route("create_score_rule", "POST", "/v1/score-rules", body="scores:ScoreRuleCreate", answer="scores:ScoreRule", status=201)
LIST_SCORE_RULES = Route("list_score_rules", "GET", "/v1/score-rules", query="scores:ScoreRuleListQuery", answer="scores:ScoreRule", paginated=True)
GET_SCORE_RULE = Route("get_score_rule", "GET", "/v1/score-rules/{rule_id}", answer="scores:ScoreRule")
DELETE_SCORE_RULE = Route("delete_score_rule", "DELETE", "/v1/score-rules/{rule_id}", status=204)
SCORE_EXPERIMENT = Route("score_experiment", "POST", "/v1/experiments/{experiment_id}/score", body="scores:ScoreRequest", answer="scores:ScoreJobAccepted", status=202, body_optional=True)
GET_SCORE_JOB = Route("get_score_job", "GET", "/v1/score-jobs/{job_id}", answer="scores:ScoreJob")
STREAM_SCORE_JOB = Route("stream_score_job", "GET", "/v1/score-jobs/{job_id}/stream", stream=SSE, events="scores:ScoreJobEvent")
EXPERIMENT_SCORES = Route("experiment_scores", "GET", "/v1/experiments/{experiment_id}/scores", query="scores:ExperimentScoresQuery", answer="scores:ExperimentScores")
LIST_SCORES = Route("list_scores", "GET", "/v1/scores", query="scores:ScoreListQuery", answer="scores:Score", paginated=True)

# --- secrets -----------------------------------------------------------------------------------------
PUT_SECRET = Route("put_secret", "PUT", "/v1/secrets/{name}", body="secrets:SecretPut", answer="secrets:SecretInfo")
GET_SECRET = Route("get_secret", "GET", "/v1/secrets/{name}", answer="secrets:SecretInfo")
LIST_SECRETS = Route("list_secrets", "GET", "/v1/secrets")
DELETE_SECRET = Route("delete_secret", "DELETE", "/v1/secrets/{name}", status=204)

# --- specs -------------------------------------------------------------------------------------------
UPLOAD_SPEC = Route("upload_spec", "POST", "/v1/specs", body="specs:SpecUpload", query="specs:SpecUploadQuery", answer="specs:SpecRecord", status=201, content_types=SPEC_CONTENT_TYPES)
LIST_SPECS = Route("list_specs", "GET", "/v1/specs", query="specs:SpecListQuery", answer="specs:SpecRecord", paginated=True)
GET_SPEC = Route("get_spec", "GET", "/v1/specs/{spec_id}", query="specs:SpecGetQuery", answer="specs:SpecRecord")
SPEC_VERSIONS = Route("spec_versions", "GET", "/v1/specs/{spec_id}/versions", query="common:PageQuery", answer="specs:SpecVersion", paginated=True)
DELETE_SPEC = Route("delete_spec", "DELETE", "/v1/specs/{spec_id}", status=204)
GET_SPEC_SCHEMA = Route("get_spec_schema", "GET", "/v1/spec-schema")  # the JSON Schema of spec files (= svc spec schema)

# --- traces ------------------------------------------------------------------------------------------
INGEST_TRACES = Route("ingest_traces", "POST", "/v1/traces", body="traces:TraceIngestBody", answer="traces:IngestResult", status=202)
INGEST_SANDBOX_TRACE = Route("ingest_sandbox_trace", "POST", "/v1/sandboxes/{sandbox_id}/trace", body="traces:TraceIngestBody", answer="traces:IngestResult", status=202, content_types=("application/json", PROTOBUF))
INGEST_OTLP = Route("ingest_otlp", "POST", "/otel/v1/traces", content_types=(PROTOBUF, "application/json"))
LIST_TRACES = Route("list_traces", "GET", "/v1/traces", query="traces:EventListQuery", answer="traces:TraceEvent", paginated=True, stream=NDJSON, events="traces:TraceEvent")
GET_TRACE = Route("get_trace", "GET", "/v1/traces/{trace_id}", answer="traces:TraceDetail")
LIST_SPANS = Route("list_spans", "GET", "/v1/spans", query="traces:SpanListQuery", answer="traces:Span", paginated=True, stream=NDJSON, events="traces:Span")
SANDBOX_TRACE = Route("sandbox_trace", "GET", "/v1/sandboxes/{sandbox_id}/trace", query="traces:SandboxEventListQuery", answer="traces:TraceEvent", paginated=True, stream=NDJSON, events="traces:TraceEvent")
AGENT_TRACES = Route("agent_traces", "GET", "/v1/agents/{name}/traces", query="traces:AgentTracesQuery", answer="traces:AgentTraces")
GET_RUN_ATIF = Route("get_run_atif", "GET", "/v1/runs/{run_id}/atif", answer="atif:AtifTrajectory")
IMPORT_TRAJECTORY = Route("import_trajectory", "POST", "/v1/trajectories", body="atif:AtifTrajectory", query="atif:TrajectoryImportQuery", answer="atif:TrajectoryImported", status=201)

# --- webhooks ----------------------------------------------------------------------------------------
CREATE_WEBHOOK = Route("create_webhook", "POST", "/v1/webhooks", body="webhooks:WebhookCreate", answer="webhooks:Webhook", status=201)
LIST_WEBHOOKS = Route("list_webhooks", "GET", "/v1/webhooks", query="common:PageQuery", answer="webhooks:Webhook", paginated=True)
GET_WEBHOOK = Route("get_webhook", "GET", "/v1/webhooks/{webhook_id}", answer="webhooks:Webhook")
DELETE_WEBHOOK = Route("delete_webhook", "DELETE", "/v1/webhooks/{webhook_id}", status=204)
LIST_WEBHOOK_DELIVERIES = Route("list_webhook_deliveries", "GET", "/v1/webhooks/{webhook_id}/deliveries", query="common:PageQuery", answer="webhooks:Delivery", paginated=True)


ALL: tuple[Route, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Route))
BY_NAME: dict[str, Route] = {route.name: route for route in ALL}
assert len(BY_NAME) == len(ALL), "two routes share a name"
assert len({(r.method, r.path) for r in ALL}) == len(ALL), "two routes share a method and path"
