# Two commands on a fresh machine (see README.md):
#   make book   build the HTML book into _build/html (sets everything up first)
#   make test   run the whole test suite (sets everything up first)
# Everything runs inside .venv, made here from requirements.txt.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium
UV_VERSION := 0.13.9
export MPLBACKEND := Agg
export PYTHONHASHSEED := 0

.PHONY: setup book book-student pdf test test-latest test-fast bench student grade system-packages clean

# torch is installed by pip, which honours the machine's pip configuration (here: a local CPU
# build); everything else, torch's dependencies included, by uv when it can be had (several
# times faster than pip), else by pip. The same pins of requirements.txt either way. uv is told
# to compile the bytecode, as pip does: where PYTHONDONTWRITEBYTECODE is set, a package without
# it is compiled again by every process that imports it (about 6 s for a chapter's imports).
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-deps $$(grep '^torch==' requirements.txt)
	grep -v '^torch==' requirements.txt > $(VENV)/requirements-without-torch.txt
	if $(BIN)/python -m pip install --quiet uv==$(UV_VERSION); then \
	  $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -r $(VENV)/requirements-without-torch.txt; \
	else \
	  echo "uv could not be installed: installing with pip"; \
	  $(BIN)/python -m pip install --quiet -r requirements.txt; \
	fi
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/python tools/build_book.py

book-student: $(STAMP)
	$(BIN)/python tools/build_book.py --student

# The whole book as one PDF (_build/pdf/), printed by the headless Chromium of the browser tests.
pdf: setup
	$(BIN)/python tools/build_pdf.py

# Debian packages the tests drive, installed when missing: chromium for the browser
# tests and the PDF, poppler-utils to read the PDF back, bubblewrap for the grader's sandbox.
system-packages:
	@missing=""; \
	{ test -x $(CHROMIUM) || command -v chromium >/dev/null 2>&1; } || missing="chromium fonts-dejavu-core"; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	command -v pdftotext >/dev/null 2>&1 || missing="$$missing poppler-utils"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages for the tests:$$missing"; \
	  SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

setup: $(STAMP) system-packages

# Every phase, timed (tools/run_tests.py): install, lint, unit, grader, notebooks, book, student book, browser.
test:
	$(PYTHON) tools/run_tests.py

# Every chapter in a throwaway environment with the newest dependencies pyproject.toml allows
# (tools/test_latest.py; report in _build/latest/report.txt).
test-latest:
	$(PYTHON) tools/test_latest.py

# Everything except the notebooks and the browser tests: a quick check while editing lib/.
test-fast: $(STAMP)
	$(BIN)/python -m pytest tests -m "not browser and not built and not pdf"

bench: $(STAMP)
	$(BIN)/python -m dlbook bench

student: $(STAMP)
	$(BIN)/python -m dlbook student --out student

grade: setup
	$(BIN)/python -m dlbook grade $(SUBMISSIONS) --chapter $(CHAPTER) --out grades/grades.csv

clean:
	rm -rf _build student grades
