#!/usr/bin/env bash
# Side by side: Strata's thumbor-compatible route against thumbor 7.8, URL by URL. Run by hand (not
# in CI); its table goes in the docs.
#
#   Scripts/thumbor-compare.sh [--json FILE] [--thumbor-only]
#
# Starts thumbor 7.8 (from .loadtest/venv, the load test's virtual environment) and `strata serve`,
# both on 127.0.0.1 and a free port, both over the same scratch copy of the photos (made by
# Scripts/thumbor/compare.py prepare: seven fixtures, a watermark PNG with alpha, a framed PNG for
# trim, a corrupt JPEG), with the same security key and unsafe URLs off:
#   thumbor  file loader, no storage, no result storage, SECURITY_KEY, ALLOW_UNSAFE_URL = False,
#            RESPECT_ORIENTATION = True, QUALITY = 80, MAX_WIDTH = MAX_HEIGHT = 0, DETECTORS =
#            face + feature (OpenCV, so that smart/ really detects)
#   strata   its configuration file: source.directory, disk.path, thumbor.enabled: true,
#            thumbor.securityKey, thumbor.allowUnsafe: false (thumbor.quality left at its default,
#            80 as thumbor's QUALITY)
# then signs and sends every line of Scripts/thumbor/urls.txt to both and compares the answers
# (Scripts/thumbor/compare.py: status, format, size, PSNR >= 30 dB, crop offset within 2 % of the
# width). Prints the markdown table and a summary line on stdout (progress on stderr); --json FILE
# also writes every measurement, with each server's wall time per URL. Exit status 0 when no URL
# failed, 1 when some did, 2 when it could not run.
#
#   --thumbor-only  no Strata: thumbor is compared with itself (each URL fetched twice), which
#                   exercises the whole comparison and checks that thumbor answers every URL as
#                   urls.txt expects; the crop offsets found are also checked against the crops
#                   thumbor's meta/ JSON reports.
#
# Environment:
#   STRATA                        the strata binary (default .build/release/strata); not built here
#   THUMBOR_COMPARE_STRATA_ARGS   extra flags for `strata serve`
#   THUMBOR_COMPARE_STRATA_CONFIG extra configuration keys for Strata as one JSON object of dotted
#                                 keys, e.g. '{"memory.costLimit": "256MiB"}'
#   THUMBOR_COMPARE_STRATA_PREFIX Strata's route under a path (thumbor.prefix, e.g. /thumbor;
#                                 default: none, the URLs are at the root as on thumbor)
#   THUMBOR_COMPARE_URLS          another URL list (default Scripts/thumbor/urls.txt)
#   THUMBOR_COMPARE_KEEP=1        keep the scratch folder (logs, configurations, photos) and print its path
# (None of them starts with STRATA_: `strata serve` refuses STRATA_ variables that are not its keys.)
#
# It installs what the venv lacks: thumbor 7.8.0 (pip, as Scripts/loadtest.sh does), numpy and
# opencv-python-headless < 5 (OpenCV 5 no longer has the CascadeClassifier thumbor's face
# detector uses). Every process it starts gets its own process group and is stopped by that id on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HERE="$ROOT/Scripts/thumbor"
VENV="$ROOT/.loadtest/venv"
THUMBOR_VERSION="7.8.0"
STRATA_BIN="${STRATA:-$ROOT/.build/release/strata}"
URLS="${THUMBOR_COMPARE_URLS:-$HERE/urls.txt}"

JSON_OUT=""
THUMBOR_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --json)
      [ $# -ge 2 ] || { echo "--json needs a FILE" >&2; exit 2; }
      JSON_OUT=$2
      shift
      ;;
    --json=*) JSON_OUT=${1#--json=} ;;
    --thumbor-only) THUMBOR_ONLY=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "unknown argument: $1 (usage: Scripts/thumbor-compare.sh [--json FILE] [--thumbor-only])" >&2
      exit 2
      ;;
  esac
  shift
done
if [ -n "$JSON_OUT" ]; then
  case "$JSON_OUT" in /*) ;; *) JSON_OUT="$PWD/$JSON_OUT" ;; esac
fi

log() { printf '[thumbor-compare] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 2
}

# ---------------------------------------------------------------- the virtual environment

if ! "$VENV/bin/python" -c "import thumbor, sys; sys.exit(thumbor.__version__ != '$THUMBOR_VERSION')" >/dev/null 2>&1; then
  log "making $VENV with thumbor $THUMBOR_VERSION (pip)"
  mkdir -p "$(dirname "$VENV")"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "thumbor==$THUMBOR_VERSION" >&2 ||
    die "pip could not install thumbor $THUMBOR_VERSION (Scripts/loadtest.sh knows the Debian packages it may need)"
fi
PY="$VENV/bin/python"
DETECTORS="['thumbor.detectors.face_detector', 'thumbor.detectors.feature_detector']"
if ! "$PY" -c 'import numpy, cv2; cv2.CascadeClassifier; cv2.goodFeaturesToTrack' >/dev/null 2>&1; then
  log "installing numpy and opencv-python-headless<5 into $VENV (pip), for thumbor's smart detectors"
  if ! "$VENV/bin/pip" install -q --disable-pip-version-check numpy 'opencv-python-headless<5' >&2 ||
    ! "$PY" -c 'import numpy, cv2; cv2.CascadeClassifier' >/dev/null 2>&1; then
    "$PY" -c 'import numpy' >/dev/null 2>&1 || die "numpy is missing and pip could not install it"
    log "warning: no OpenCV: thumbor runs without detectors, smart/ crops are then plain centre crops"
    DETECTORS="[]"
  fi
fi

# ---------------------------------------------------------------- processes and scratch

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/strata-thumbor-compare.XXXXXX")
KEEP_VARIABLE=THUMBOR_COMPARE_KEEP
# shellcheck source=lib/processes.sh
source "$ROOT/Scripts/lib/processes.sh"

free_port() { "$PY" "$HERE/compare.py" port; }

command -v curl >/dev/null 2>&1 || die "curl is missing (apt-get install curl)"
"$PY" "$HERE/compare.py" prepare "$ROOT/Fixtures" "$SCRATCH/src"
KEY="compare-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"

# ---------------------------------------------------------------- thumbor

THUMBOR_PORT=$(free_port)
cat >"$SCRATCH/thumbor.conf" <<EOF
LOADER = 'thumbor.loaders.file_loader'
FILE_LOADER_ROOT_PATH = '$SCRATCH/src'
# No storage of the originals and no result storage: every answer is rendered.
STORAGE = 'thumbor.storages.no_storage'
RESULT_STORAGE = None
SECURITY_KEY = '$KEY'
ALLOW_UNSAFE_URL = False
RESPECT_ORIENTATION = True
QUALITY = 80
MAX_WIDTH = 0
MAX_HEIGHT = 0
DETECTORS = $DETECTORS
EOF
start thumbor "$VENV/bin/thumbor" --ip 127.0.0.1 --port "$THUMBOR_PORT" --conf "$SCRATCH/thumbor.conf" \
  --processes 1 --log-level warning
THUMBOR_PID=$LAST_PID
THUMBOR_BASE="http://127.0.0.1:$THUMBOR_PORT"
wait_http thumbor "$THUMBOR_PID" "$THUMBOR_BASE/healthcheck"
log "thumbor $THUMBOR_VERSION (pid $THUMBOR_PID) on $THUMBOR_BASE, detectors $DETECTORS"

# ---------------------------------------------------------------- strata

STRATA_ARGS=()
if [ "$THUMBOR_ONLY" = 1 ]; then
  log "--thumbor-only: thumbor is compared with itself"
else
  [ -x "$STRATA_BIN" ] || die "no strata binary at $STRATA_BIN (set STRATA=..., or run with --thumbor-only)"
  "$STRATA_BIN" serve --help >/dev/null 2>&1 || die "'$STRATA_BIN serve --help' fails"
  STRATA_PORT=$(free_port)
  mkdir -p "$SCRATCH/disk"
  # The configuration file (JSON is YAML), nested from dotted keys as Scripts/soak.sh writes it.
  "$PY" - "$SCRATCH" "$KEY" "${THUMBOR_COMPARE_STRATA_CONFIG:-}" "${THUMBOR_COMPARE_STRATA_PREFIX:-}" <<'PY'
import json, sys
scratch, key, extra, prefix = sys.argv[1:]
values = {
    "source.directory": f"{scratch}/src",
    "disk.path": f"{scratch}/disk",
    "thumbor.enabled": True,
    "thumbor.securityKey": key,
    "thumbor.allowUnsafe": False,
}
if prefix.strip("/"):
    values["thumbor.prefix"] = "/" + prefix.strip("/")
values.update(json.loads(extra) if extra.strip() else {})
tree = {}
for k, v in values.items():
    node = tree
    *parents, last = k.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = v
with open(f"{scratch}/strata.yaml", "w") as f:
    json.dump(tree, f, indent=2)
PY
  # shellcheck disable=SC2206 # THUMBOR_COMPARE_STRATA_ARGS is a list of flags
  STRATA_ARGS=(${THUMBOR_COMPARE_STRATA_ARGS:-})
  start strata env -u STRATA "$STRATA_BIN" serve --config "$SCRATCH/strata.yaml" --host 127.0.0.1 \
    --port "$STRATA_PORT" "${STRATA_ARGS[@]+"${STRATA_ARGS[@]}"}"
  STRATA_PID=$LAST_PID
  STRATA_BASE="http://127.0.0.1:$STRATA_PORT"
  wait_http strata "$STRATA_PID" "$STRATA_BASE/healthz"
  log "strata serve (pid $STRATA_PID) on $STRATA_BASE"
  # Does it have the route? One signed URL that thumbor answers 200.
  probe=$("$PY" -c 'import base64, hashlib, hmac, sys
p = "fit-in/64x64/red-8x8.png"
print("/" + base64.urlsafe_b64encode(hmac.new(sys.argv[1].encode(), p.encode(), hashlib.sha1).digest()).decode() + "/" + p)' "$KEY")
  code=$(curl -sS -o /dev/null -w '%{http_code}' "$STRATA_BASE${THUMBOR_COMPARE_STRATA_PREFIX:+/${THUMBOR_COMPARE_STRATA_PREFIX#/}}$probe" || true)
  [ "$code" = 200 ] || log "warning: strata answered $code to a signed thumbor URL: is thumbor.enabled taken, is the route there?"
fi

# ---------------------------------------------------------------- the comparison

ARGS=(run --thumbor "$THUMBOR_BASE" --key "$KEY" --urls "$URLS" --src "$SCRATCH/src")
if [ "$THUMBOR_ONLY" = 1 ]; then
  ARGS+=(--thumbor-only)
else
  ARGS+=(--strata "$STRATA_BASE" --strata-prefix "${THUMBOR_COMPARE_STRATA_PREFIX:-}")
fi
[ -n "$JSON_OUT" ] && ARGS+=(--json "$JSON_OUT")
status=0
"$PY" "$HERE/compare.py" "${ARGS[@]}" || status=$?
kill -0 "$THUMBOR_PID" 2>/dev/null || { tail -n 20 "$SCRATCH/thumbor.log" >&2; die "thumbor is gone"; }
if [ "$THUMBOR_ONLY" != 1 ]; then
  kill -0 "$STRATA_PID" 2>/dev/null || { tail -n 20 "$SCRATCH/strata.log" >&2; die "strata serve is gone"; }
fi
[ -n "$JSON_OUT" ] && log "results in $JSON_OUT"
exit "$status"
