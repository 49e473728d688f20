# Two commands on a fresh machine (see README.md):
#   make book   build the HTML book into _build/html (sets everything up first)
#   make test   run the whole test suite (sets everything up first)
# Everything runs inside .venv, made here from requirements.txt.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium
export MPLBACKEND := Agg
export PYTHONHASHSEED := 0

.PHONY: book book-student test test-fast bench student grade chromium clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/python tools/build_book.py

book-student: $(STAMP)
	$(BIN)/python tools/build_book.py --student

# Debian's chromium for the browser tests, installed when missing.
chromium:
	@test -x $(CHROMIUM) || command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium fonts-dejavu-core >/dev/null; }

test: $(STAMP) chromium
	$(BIN)/python -m pytest -n 2 --dist loadscope

# Everything except the notebooks and the browser tests: a quick check while editing lib/.
test-fast: $(STAMP)
	$(BIN)/python -m pytest tests -m "not browser"

bench: $(STAMP)
	$(BIN)/python -m dlbook bench

student: $(STAMP)
	$(BIN)/python -m dlbook student --out student

grade: $(STAMP)
	$(BIN)/python -m dlbook grade $(SUBMISSIONS) --chapter $(CHAPTER) --out grades/grades.csv

clean:
	rm -rf _build student grades
