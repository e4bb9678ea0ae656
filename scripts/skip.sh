# The shell twin of tests/common/skip.rs, sourced by the test scripts (scripts/env.sh sources
# it). `tvmrt_skip [TVMRT_REQUIRE_X] WHY...` reports a stage or check that cannot run here:
# it prints `skipped: <script>: WHY` and appends that line to $TVMRT_SKIP_LOG (set by the test
# command, whose summary counts and lists every skip). When the named TVMRT_REQUIRE_* switch
# is set it fails instead: the message goes to stderr and the script exits 1.
tvmrt_skip() {
  local require=""
  case "${1:-}" in
    TVMRT_REQUIRE_*) require="$1"; shift ;;
  esac
  local who
  who="$(basename "${BASH_SOURCE[1]:-${0}}" .sh)"
  if [ -n "$require" ] && [ -n "${!require:-}" ]; then
    echo "$who: $require is set, but this cannot run: $*" >&2
    exit 1
  fi
  local line="skipped: $who: $*"
  echo "$line"
  if [ -n "${TVMRT_SKIP_LOG:-}" ]; then
    echo "$line" >>"$TVMRT_SKIP_LOG"
  fi
}
