# The user interface. Every target is a thin call of a `python -m <package>` entry point.
PY       := .venv/bin/python
VERSION  ?= 2.9
VERSIONS ?= $(VERSION)
RUNTIME  ?= auto
export VERSION VERSIONS RUNTIME

.PHONY: setup demo up down status load watch compare calibrate bisect report baseline regress scenario sweep doctor exporter images k8s test clean

.venv/.synced: pyproject.toml uv.lock scripts/bootstrap.sh
	./scripts/bootstrap.sh

setup: .venv/.synced            ## install everything (apt packages, uv, tooling venv)

demo: setup                     ## venvs, example model, two versions served, a short comparison printed
	$(PY) -m stack demo --versions "$(if $(filter command line,$(origin VERSIONS)),$(VERSIONS),2.9 2.21)"
	$(PY) -m analysis compare --versions "$(if $(filter command line,$(origin VERSIONS)),$(VERSIONS),2.9 2.21)" \
	  --profile quick --repeat 1 --runtime local

up: setup                       ## make up VERSION=2.9 | VERSIONS="2.6 2.9 2.12" [RUNTIME=local|docker]
	$(PY) -m stack up --versions "$(VERSIONS)" --runtime $(RUNTIME)

down: setup
	$(PY) -m stack down

status: setup
	$(PY) -m stack status

load: setup                     ## make load VERSION=2.9 RATE=500 DURATION=60s | CONCURRENCY=32 | STEPS="50 200 500"
	$(PY) -m loadgen run --versions "$(VERSIONS)" $(if $(PROTOCOL),--protocol $(PROTOCOL)) \
	  $(if $(RATE),--rate $(RATE)) $(if $(CONCURRENCY),--concurrency $(CONCURRENCY)) \
	  $(if $(STEPS),--steps "$(STEPS)") $(if $(DURATION),--duration $(DURATION)) $(if $(SCENARIO),--scenario $(SCENARIO)) \
	  $(if $(API),--api $(API)) $(if $(SIGNATURE),--signature $(SIGNATURE)) $(if $(MODEL),--model-path $(MODEL)) $(if $(REQUESTS),--requests $(REQUESTS))

watch: setup                    ## live terminal view of the comparison panels (Ctrl-C to leave)
	$(PY) -m stack watch

compare: setup                  ## make compare VERSIONS="2.9 2.21" [KNOBS="onednn=0,1 intra_op=1,2"] [ROWS="1 32"] [BATCHING=on|off|both] [PROTOCOL=rest|grpc|both] [PROFILE=quick|standard|file.yaml] [REPEAT=] [SLA_MS=] [ISOLATE=0] [COLD_STARTS=3] | TARGETS="2.9=grpc://h:8500,rest://h:8501 ..." PROMETHEUS=http://h:9090: servers started elsewhere
	$(PY) -m analysis compare --versions "$(if $(filter command line environment,$(origin VERSIONS)),$(VERSIONS),2.9 2.21)"

calibrate: setup                ## make calibrate VERSION=2.21 [PROFILE=..] [ROWS=..] [MODEL_B=path: a positive control]: A/A, the version against a second server of itself
	$(PY) -m analysis calibrate --version "$(if $(filter command line environment,$(origin VERSION)),$(VERSION),2.21)"

bisect: setup                   ## make bisect FROM=2.9 TO=2.21 [ROWS=32] [PROCESSES=12] [PIN=1] [EVERY=1] [MODEL=..]: the release where TF's ceiling changed, op by op
	$(PY) -m analysis bisect

report: setup                   ## make report RUN=<run id>
	$(PY) -m analysis report --run "$(RUN)"

baseline: setup                 ## make baseline RUN=<run id> NAME=tf2.9-cpu [FORCE=1]
	$(PY) -m analysis baseline --run "$(RUN)" --name "$(NAME)" $(if $(FORCE),--force)

regress: setup                  ## make regress BASELINE=<name> VERSION=<v>
	$(PY) -m analysis regress --baseline "$(BASELINE)" --version "$(VERSION)"

scenario: setup                 ## make scenario NAME=batching|protocols|hot-update|reload|neighbour VERSIONS="2.9 2.21" [CYCLES=5 CYCLE_S=6 RATE=100 NEIGHBOUR=image KNOBS=..]
	$(PY) -m analysis scenario "$(NAME)" --versions "$(VERSIONS)"

sweep: setup                    ## make sweep VERSION=2.9 MAX_BATCH="8 32 128" TIMEOUT_US="0 2000 10000" THREADS="2 4 8"
	$(PY) -m analysis scenario sweep --versions "$(VERSION)"

doctor: setup                   ## make doctor [VERSIONS=..] | TARGETS="..": each server's metrics as the rules, panels and compare read them
	$(PY) -m stack doctor --versions "$(VERSIONS)"

exporter: setup                 ## the GPU/CPU exporter on 127.0.0.1:9400 (foreground)
	$(PY) -m exporter --port 9400

k8s: setup                      ## make k8s VERSIONS="2.9 2.21" [GPU=1] [OUT=deploy/k8s/generated] [MODEL_BASE_PATH=gs://...]: Kubernetes manifests (docs/kubernetes.md)
	$(PY) -m stack k8s --versions "$(if $(filter command line environment,$(origin VERSIONS)),$(VERSIONS),2.9 2.21)"

images: setup                   ## make images VERSIONS="2.12 2.21": the compose file's images built offline (debootstrap); prints the export lines
	$(PY) -m stack images $(if $(filter command line environment,$(origin VERSIONS)),--versions "$(VERSIONS)")

test: setup                     ## the whole test suite (first run creates the TF venvs)
	$(PY) -m pytest -q

clean: setup                    ## stop everything and delete run state, exports and TSDB data (docker volumes too)
	$(PY) -m stack down --volumes
	rm -rf .state models/build results
