# Every target bootstraps the virtualenv itself: on a fresh machine `make test` or `make regress` is enough.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOBS ?= auto
LEVEL ?=
LAUNCHER ?= local
FUZZ_SECONDS ?= 300
TARGET ?= golden
# make sim TRACE=path/to/trace_or_suite [SIM=verilator|icarus] [DUT=rtl|nvdla-nv_small]
#          [RTL_FILELIST=my.f TOPLEVEL=NV_nvdla]; DUT also selects the DUT of make fuzz TARGET=verilator|icarus
SIM ?= verilator
# The DUT of the simulator targets (sim, fuzz TARGET=verilator|icarus, the RTL pytest suites through $DLA_DUT):
# rtl (ours, default) or nvdla-nv_small (tb/duts.py).
DUT ?= $(DLA_DUT)
ifneq ($(DUT),)
export DLA_DUT := $(DUT)
endif
# NVDLA conformance traces: ../shared beside the clone by default; override with NVDLA_TRACES=PATH.
NVDLA_TRACES ?= $(abspath ../shared/nvdla/traces)
export NVDLA_TRACES

.PHONY: install test regress fuzz mutate rtl-coverage bench lint sim regen-regs proto clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@command -v iverilog >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing iverilog (Debian package)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iverilog >/dev/null; \
	  else echo "warning: iverilog not found and cannot apt-get it; the icarus target will be unavailable"; fi; }
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing chromium (Debian package; headless, for the regression report's screenshot)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "warning: chromium not found and cannot apt-get it; regression reports will have no screenshot"; fi; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

test: install
	$(BIN)/python -m pytest -n $(JOBS) -q

# make regress [LEVEL=smoke|ci|nightly|full] [JOBS=auto|N] [LAUNCHER=local|slurm] [RERUN=failed] [TAGS=a,b]
#              [FUZZ_SEED=N]: report in build/regress/<timestamp>/ (build/regress/latest).
regress: install
	$(if $(filter nightly full,$(LEVEL)),$(BIN)/python -m pip install --quiet -e '.[frontends]')
	$(if $(FUZZ_SEED),FUZZ_SEED=$(FUZZ_SEED)) $(BIN)/python -m regressions.regress $(if $(LEVEL),--level $(LEVEL)) \
	  --jobs $(JOBS) --launcher $(LAUNCHER) \
	  $(if $(RERUN),--rerun $(RERUN)) $(if $(TAGS),--tags $(TAGS)) $(if $(UNITS),--units $(UNITS))

# make fuzz [FUZZ_SECONDS=300] [TARGET=golden|verilator|icarus] [DUT=rtl|nvdla-nv_small] [FUZZ_SEED=N] [PROPERTY=sdp]
fuzz: install
	$(BIN)/python -m regressions.fuzz --seconds $(FUZZ_SECONDS) --target $(TARGET) $(if $(DUT),--dut $(DUT)) \
	  $(if $(FUZZ_SEED),--seed $(FUZZ_SEED)) $(if $(PROPERTY),--property $(PROPERTY))

# make mutate [TARGET=golden|rtl|nvdla-rtl] [UNIT=sdp] [N=300] [JOBS=2] [MIN_SCORE=0.95]: a mutation campaign
# (build/mutate/TARGET/report.md; rtl: our rtl/, units dla_pdp, dla_sdp_x ...; nvdla-rtl: NVDLA's nv_small datapath,
# units cdma csc cmac cacc sdp pdp cdp, one schemata build, N defaults to 300)
mutate: install
	$(BIN)/python -m regressions.mutate $(TARGET) $(if $(UNIT),--unit $(UNIT)) $(if $(N),-n $(N)) \
	  $(if $(MIN_SCORE),--min-score $(MIN_SCORE)) --jobs $(if $(filter auto,$(JOBS)),2,$(JOBS))

# make rtl-coverage [LEVEL=ci|nightly] [POOL=both|traces|suite] [JOBS=2] [FUZZ_SEED=N]: Verilator line/toggle coverage
# of NVDLA's nv_small RTL per unit, NVDLA's traces vs our suites (build/rtl-coverage/<time>/report.md; latest)
rtl-coverage: install
	$(BIN)/python -m regressions.coverage.nvdla_rtl --pool $(or $(POOL),both) --level $(or $(LEVEL),ci) \
	  --jobs $(if $(filter auto,$(JOBS)),2,$(JOBS)) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED))

bench: install
	$(BIN)/python -m regressions.bench --out build/bench/results.json

sim: install
	@test -n "$(TRACE)" || { echo "usage: make sim TRACE=PATH [SIM=verilator|icarus] [DUT=NAME | RTL_FILELIST=F TOPLEVEL=T]"; exit 2; }
	$(BIN)/dla trace $(TRACE) --target $(SIM) -j 2 $(if $(DUT),--dut $(DUT)) $(if $(RTL_FILELIST),--rtl-filelist $(RTL_FILELIST)) $(if $(TOPLEVEL),--toplevel $(TOPLEVEL))

lint: install
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q tests/rtl/test_lint.py tests/test_layers.py

regen-regs: install
	$(BIN)/python tools/gen_regs.py --rdl $(abspath ../shared/nvdla/spec/manual) --out golden/regs/_table.py
	$(BIN)/python tools/gen_rtl_headers.py

proto: install
	$(BIN)/python -m pip install --quiet -e '.[proto]'
	$(BIN)/python -m grpc_tools.protoc -Iloadable --python_out=loadable loadable/loadable.proto
	$(BIN)/python -m grpc_tools.protoc -Icompiler/proto --python_out=compiler/proto compiler/proto/caffe.proto

clean:
	rm -rf build .pytest_cache
