# svc developer entry points. CI runs `.ci/run`, which ends in `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Extra pytest arguments: make test PYTEST_ARGS='-k images'
PYTEST_ARGS ?=
# The demo keeps its daemon state here (gitignored), away from your real one.
DEMO_HOME ?= $(CURDIR)/.svc-home/demo

.PHONY: setup docker images lint typecheck typecheck-baseline docs test test-agents test-security demo bench bench-inspect bench-proxies clean-images

## setup: venv + install of the checkout (not editable, as users get it) with test extras, Docker engine, stock images
setup: $(PY)
	$(PY) -m pip install -q --force-reinstall --no-deps . && $(PY) -m pip install -q '.[test]'
	bash .ci/docker.sh

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

## docker: install/start dockerd and build missing stock images (idempotent)
docker:
	bash .ci/docker.sh

## images: build the missing/outdated stock images (FORCE=1 rebuilds everything)
images:
	$(PY) -m daemon.sandbox.images build $(if $(FORCE),--force)
	$(PY) -m daemon.sandbox.images list

## test: the whole suite (the README's test command; what CI runs), the swarm tests included. Two
## pytest processes run side by side: the in-process tests (IN_PROCESS_TESTS: mostly CPU) and the
## engine tests (ENGINE_TESTS: mostly waiting on containers), whose log is printed after; the local
## swarm comes up in the background meanwhile (tests/swarm wait for it; a failure there fails them,
## never skips them) and goes down at the end, also when tests fail. Both must pass.
IN_PROCESS_TESTS ?= tests/unit tests/api tests/tui tests/e2e
# The chaos suite (tests/chaos, about 2 minutes) runs in CI too; `make chaos` runs it alone.
ENGINE_TESTS ?= tests/docker tests/security tests/swarm tests/chaos
test: setup lint typecheck docs
	@mkdir -p .svc-home
	$(PY) swarm/cluster.py up >.svc-home/swarm-up.log 2>&1 & up=$$!; \
	  $(PY) -m pytest -q -ra --durations=10 -p no:cacheprovider $(IN_PROCESS_TESTS) $(PYTEST_ARGS) \
	    >.svc-home/test-in-process.log 2>&1 & inproc=$$!; \
	  SVC_SWARM_TESTS=1 $(PY) -m pytest -q -ra --durations=15 $(ENGINE_TESTS) $(PYTEST_ARGS); rc=$$?; \
	  wait $$inproc; rc_inproc=$$?; \
	  echo "== $(IN_PROCESS_TESTS) (ran alongside; exit $$rc_inproc)"; cat .svc-home/test-in-process.log; \
	  wait $$up; cat .svc-home/swarm-up.log >&2; $(MAKE) --no-print-directory swarm-down; \
	  for code in $$rc $$rc_inproc; do [ $$code -eq 0 ] || [ $$code -eq 5 ] || exit $$code; done

## lint: ruff over the code and the tests (bugs, not style; [tool.ruff] in pyproject.toml)
lint: $(PY)
	$(VENV)/bin/ruff check daemon client tui tests

## typecheck: mypy over daemon, client and tui ([tool.mypy] in pyproject.toml: which modules are strict), held
## to .ci/mypy-baseline.txt: a new error fails, and so does a fixed one until the baseline is rewritten
typecheck: $(PY)
	$(PY) .ci/mypy_baseline.py

## typecheck-baseline: rewrite .ci/mypy-baseline.txt from today's errors (refused while there are new ones)
typecheck-baseline: $(PY)
	$(PY) .ci/mypy_baseline.py --update

## docs: the documentation site (docs/, mkdocs.yml) built with --strict into build/site: a broken link,
## a missing page or a generator that fails stops it; the build first rewrites docs/reference/ from the code
docs: $(PY)
	@$(PY) -c 'import mkdocs, material, pydantic' 2>/dev/null || $(PY) -m pip install -q '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

## test-agents: every installed coding agent for real (claude-code, codex, mini-swe-agent: layers built from npm and
## PyPI, minutes on a fresh machine); make test runs one representative agent
test-agents: setup
	SVC_INSTALLED_AGENTS=claude-code,codex,mini-swe-agent $(PY) -m pytest -q -ra tests/docker/test_installed_agents.py $(PYTEST_ARGS)

## test-security: the attack suite alone (tests/security: hostile agents and tenants against real containers)
test-security: setup
	$(PY) -m pytest -q -ra tests/security $(PYTEST_ARGS)

## chaos: the fault-injection suite (tests/chaos, real engine, root for the small-disk case): engine restart and
## socket dropped mid-experiment, SERVICE_HOME filling, svcd killed during a Dockerfile build; each checks
## verdicts, losses, store integrity and leaks
## (docs/explanation/chaos.md has the table)
chaos: setup
	$(PY) -m pytest -q -ra -s tests/chaos $(PYTEST_ARGS)

## soak: SOAK_RUNS (default 2000) trivial runs at concurrency 4 with the warm pool; prints daemon RSS, open fds,
## engine objects and store size every 100 runs, and whether each stayed flat within 10% (not in CI)
soak: setup
	$(PY) -m tests.bench.bench_soak

## demo: from a fresh machine: set up, start a throw-away daemon, run the example eval, stop
demo: setup
	SERVICE_HOME=$(DEMO_HOME) $(PY) -m client.cli spec validate examples/quickstart.yaml
	SERVICE_HOME=$(DEMO_HOME) $(PY) -m client.cli eval run examples/quickstart.yaml; \
	  rc=$$?; SERVICE_HOME=$(DEMO_HOME) $(PY) -m client.cli daemon stop; exit $$rc

## bench: API latency benchmark (prints numbers, asserts nothing)
bench: setup
	$(PY) -m tests.bench.bench_api
	$(PY) -m tests.bench.bench_sandbox
	$(PY) -m tests.bench.bench_runs --runs 5
	$(PY) -m tests.bench.bench_traces
	$(PY) -m tests.bench.bench_scheduler
	$(PY) -m tests.bench.bench_tui
	$(PY) -m tests.bench.bench_hostile
	$(PY) -m tests.bench.bench_grader
	$(PY) -m tests.bench.bench_flood
	$(PY) -m tests.bench.bench_datasets
	$(PY) -m tests.bench.bench_score_rules
	$(PY) -m tests.bench.bench_judges
	$(PY) -m tests.bench.bench_alerts
	$(PY) -m tests.bench.bench_scale
	$(PY) -m tests.bench.bench_proxies
	$(PY) -m tests.bench.bench_chat
	$(PY) -m tests.bench.bench_swarm
	$(PY) -m tests.bench.bench_gateway
	$(PY) -m tests.bench.bench_gateway_boot
	$(PY) -m tests.bench.bench_inspect
	$(PY) -m tests.bench.bench_harbor

## bench-inspect: svc beside Inspect AI's docker sandbox on the same trivial samples (Inspect in a side venv:
## SVC_INSPECT_PYTHON=/tmp/inspect-venv/bin/python; the docker compose v2 plugin; see the module's docstring)
bench-inspect:
	$(PY) -m tests.bench.bench_inspect

## bench-proxies: overhead of the db audit (in the server) and the egress audit proxy (pgbench TPS, HTTP req/s; ratios)
bench-proxies:
	$(PY) -m tests.bench.bench_proxies

## clean-images: remove the stock images (the rootfs cache stays: rebuild takes seconds)
clean-images:
	-docker image rm localhost/svc/python:3.11 localhost/svc/postgres:15 localhost/svc/redis:7

## swarm-up: a 2-node Docker Swarm on this machine (nodes as containers, registry, stock images); writes .svc-home/swarm.env
swarm-up: setup
	$(PY) swarm/cluster.py up

## swarm-down: remove the swarm's nodes, volumes, registry and network
swarm-down:
	$(PY) swarm/cluster.py down

## test-swarm: only the swarm driver's tests (tests/swarm/, also part of `make test`); brings the swarm up first
test-swarm: swarm-up
	SVC_SWARM_TESTS=1 $(PY) -m pytest -q -ra tests/swarm $(PYTEST_ARGS)
