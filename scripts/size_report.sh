#!/usr/bin/env bash
# Size report of the runtime's feature sets (issue 32): builds each set with the stock toolchain
# (`cargo build --release -p tvm-runtime-capi --lib`, the repository's release profile), each into
# its own target directory (target/sets/<set>; the x86-64 default is the workspace's own
# `cargo build --release` in target/release), for x86-64 and/or aarch64, strips copies and
# prints one table: set, arch, stripped libtvm_runtime.so, libtvm_runtime.a as built and after
# `strip --strip-debug`, the budget and the ceiling of the .so, and a verdict.
#
#   scripts/size_report.sh [--arch x86_64|aarch64|all] [--sets "default cpu deploy minimal"]
#                          [--top N] [--small] [--static] [--no-build]
#                          [--check] [--budgets FILE]
#
#   --arch A     x86_64 (default), aarch64 (cross-built with gcc-aarch64-linux-gnu, installed
#                here when missing, as scripts/setup.sh does) or all
#   --sets S     the sets, space- or comma-separated (default: default cpu deploy minimal):
#                default = `cargo build --release`, the others `--no-default-features
#                --features <set>`
#   --top N      also the N largest contributors of each set's .so, by crate and by
#                tvm_runtime module (summed `nm -S --size-sort -C` sizes of the unstripped .so:
#                generic code counts for the crate of its first path, except drop glue and
#                `<T as Trait>` impls, which count for T's crate; `TVM*` C entries count for
#                tvm_runtime's c_api), the N largest symbols and the sections of the stripped .so
#   --small      also the nightly build-std builds of deploy and minimal (scripts/build_small.sh,
#                x86-64; rows "deploy (small)")
#   --static     also the static deploy program for the bundled mlp (scripts/static_deploy.sh,
#                x86-64; row "static mlp", its stripped size in the .so column)
#   --no-build   measure what target/sets holds, build nothing
#   --check      compare with the budgets file: exit 1 when a size exceeds its ceiling (what main
#                is held to now) or a budgeted row is missing; every size over its budget (the
#                issue's target) is printed as OVER BUDGET, which does not fail the check
#   --budgets F  the budgets file (default benches/size_budgets.tsv)
#
# Sizes are in bytes; KB in the text means 1024 bytes. The .a column is the archive as cargo
# leaves it (the release profile has `debug = 1`), the strip-debug column the same archive after
# `strip --strip-debug` (what a program linking it starts from); budgets apply to the .so.
set -euo pipefail
cd "$(dirname "$0")/.."

arches=(x86_64)
sets=(default cpu deploy minimal)
top=0
small=0
static=0
build=1
check=0
budgets="benches/size_budgets.tsv"
while [ $# -gt 0 ]; do
  case "$1" in
    --arch)
      case "${2:-}" in
        x86_64|aarch64) arches=("$2") ;;
        all) arches=(x86_64 aarch64) ;;
        *) echo "size_report.sh: --arch x86_64|aarch64|all" >&2; exit 2 ;;
      esac
      shift 2 ;;
    --sets) IFS=', ' read -r -a sets <<<"$2"; shift 2 ;;
    --top) top="$2"; shift 2 ;;
    --small) small=1; shift ;;
    --static) static=1; shift ;;
    --no-build) build=0; shift ;;
    --check) check=1; shift ;;
    --budgets) budgets="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#'; exit 0 ;;
    *) echo "size_report.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for s in "${sets[@]}"; do
  case "$s" in
    default|cpu|deploy|minimal) ;;
    *) echo "size_report.sh: unknown set $s (default, cpu, deploy, minimal)" >&2; exit 2 ;;
  esac
done

AARCH64=aarch64-unknown-linux-gnu
# The cross toolchain for aarch64, installed idempotently (as scripts/setup.sh installs).
setup_aarch64() {
  if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
    echo "size_report: installing gcc-aarch64-linux-gnu" >&2
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq gcc-aarch64-linux-gnu >/dev/null
  fi
  if ! rustup target list --installed | grep -qx "$AARCH64"; then
    echo "size_report: adding the rustup target $AARCH64" >&2
    rustup target add "$AARCH64" >&2
  fi
}

# lib_dir SET ARCH: where cargo leaves the set's libraries.
lib_dir() {
  if [ "$1" = default ] && [ "$2" = x86_64 ]; then
    echo "target/release"
  elif [ "$2" = aarch64 ]; then
    echo "target/sets/$1/$AARCH64/release"
  else
    echo "target/sets/$1/release"
  fi
}
# tool ARCH NAME: the binutils tool for the architecture.
tool() {
  if [ "$1" = aarch64 ]; then echo "aarch64-linux-gnu-$2"; else echo "$2"; fi
}

build_set() {
  local set="$1" arch="$2" feat=() tgt=() envs=()
  [ "$set" = default ] || feat=(--no-default-features --features "$set")
  if [ "$arch" = aarch64 ]; then
    tgt=(--target "$AARCH64")
    # The linker, and CC for build.rs (it compiles the tvm-ffi shim the library embeds).
    envs=(CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
          CC=aarch64-linux-gnu-gcc)
  fi
  local t0=$SECONDS
  echo "size_report: building $set ($arch)" >&2
  if [ "$set" = default ] && [ "$arch" = x86_64 ]; then
    # The budget's own command: the workspace's `cargo build --release` (the test command has
    # built it already, so this is a no-op there).
    cargo build --release >&2
    echo "size_report: built $set ($arch) in $((SECONDS - t0)) s" >&2
    return
  fi
  env "${envs[@]}" cargo build --release -p tvm-runtime-capi --lib --target-dir "target/sets/$set" \
    "${tgt[@]}" "${feat[@]}" >&2
  echo "size_report: built $set ($arch) in $((SECONDS - t0)) s" >&2
}

if [ "$build" = 1 ]; then
  for arch in "${arches[@]}"; do
    [ "$arch" = aarch64 ] && setup_aarch64
    for s in "${sets[@]}"; do build_set "$s" "$arch"; done
  done
fi

# Rows: artifact set arch so_bytes a_bytes a_strip_debug_bytes label
rows="$(mktemp)"
trap 'rm -f "$rows"' EXIT
for arch in "${arches[@]}"; do
  for s in "${sets[@]}"; do
    d="$(lib_dir "$s" "$arch")"
    if [ ! -f "$d/libtvm_runtime.so" ] || [ ! -f "$d/libtvm_runtime.a" ]; then
      echo "size_report.sh: $d has no libtvm_runtime.so/.a (build it, or drop --no-build)" >&2
      exit 1
    fi
    sd="target/sets/$s/stripped-$arch"
    mkdir -p "$sd"
    "$(tool "$arch" strip)" -o "$sd/libtvm_runtime.so" "$d/libtvm_runtime.so"
    "$(tool "$arch" strip)" --strip-debug -o "$sd/libtvm_runtime.a" "$d/libtvm_runtime.a"
    printf 'so\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$arch" "$(stat -c %s "$sd/libtvm_runtime.so")" \
      "$(stat -c %s "$d/libtvm_runtime.a")" "$(stat -c %s "$sd/libtvm_runtime.a")" "$s" >>"$rows"
  done
done
if [ "$small" = 1 ]; then
  for s in deploy minimal; do
    if [ "$build" = 1 ]; then
      lib="$(bash scripts/build_small.sh "$s" | tail -n 1)"
    else
      lib="target/small/$s/x86_64-unknown-linux-gnu/release/libtvm_runtime.so"
    fi
    [ -f "$lib" ] || { echo "size_report.sh: build_small.sh $s gave no library" >&2; exit 1; }
    stripped="target/small/$s/libtvm_runtime.stripped.so"
    strip -o "$stripped" "$lib"
    a="$(dirname "$lib")/libtvm_runtime.a"
    abytes="-"
    astrip="-"
    if [ -f "$a" ]; then
      strip --strip-debug -o "target/small/$s/libtvm_runtime.strip-debug.a" "$a"
      abytes="$(stat -c %s "$a")"
      astrip="$(stat -c %s "target/small/$s/libtvm_runtime.strip-debug.a")"
    fi
    printf 'small-so\t%s\tx86_64\t%s\t%s\t%s\t%s\n' "$s" "$(stat -c %s "$stripped")" \
      "$abytes" "$astrip" "$s (small)" >>"$rows"
  done
fi
if [ "$static" = 1 ]; then
  nb=()
  [ "$build" = 1 ] || nb=(--no-build)
  prog="$(bash scripts/static_deploy.sh "${nb[@]}" | tail -n 1)"
  case "$prog" in
    skipped:*) echo "$prog" ;;  # no reference compiler here: static_deploy.sh reported the skip
    *)
      [ -f "$prog" ] || { echo "size_report.sh: static_deploy.sh gave no program" >&2; exit 1; }
      printf 'static\tmlp\tx86_64\t%s\t-\t-\tstatic mlp\n' "$(stat -c %s "$prog")" >>"$rows" ;;
  esac
fi

status=0
python3 - "$rows" "$budgets" "$check" <<'EOF' || status=$?
import sys

rows_path, budgets_path, check = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
limits = {}
try:
    with open(budgets_path) as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            art, s, arch, budget, ceiling = line.split()
            limits[(art, s, arch)] = (None if budget == "-" else int(budget),
                                      None if ceiling == "-" else int(ceiling))
except FileNotFoundError:
    if check:
        print(f"size_report: {budgets_path} is missing", file=sys.stderr)
        sys.exit(1)

def kb(n):
    return "-" if n in (None, "-") else f"{int(n) / 1024:,.1f} KB"

hdr = ("set", "arch", ".so stripped", ".a", ".a strip-debug", "budget", "ceiling", "verdict")
out, over_budget, over_ceiling, missing = [], [], [], []
for line in open(rows_path):
    art, s, arch, so, a, astrip, label = line.rstrip("\n").split("\t")
    so = int(so)
    budget, ceiling = limits.get((art, s, arch), (None, None))
    verdict = []
    if (art, s, arch) not in limits:
        verdict.append("no budget line")
        if check:
            missing.append(f"{label} {arch}")
    if ceiling is not None and so > ceiling:
        verdict.append(f"OVER CEILING (+{so - ceiling} B)")
        over_ceiling.append(f"{label} {arch}: {so} B > ceiling {ceiling} B")
    if budget is not None and so > budget:
        verdict.append(f"OVER BUDGET ({so / budget:.2f}x)")
        over_budget.append(f"{label} {arch}: {kb(so)} > budget {kb(budget)}")
    elif budget is not None:
        verdict.append("within budget")
    if ceiling is not None and so <= ceiling and (budget is None or so > budget):
        verdict.append("within ceiling")
    out.append((label, arch, f"{so:,} ({kb(so)})",
                "-" if a == "-" else f"{int(a):,}",
                "-" if astrip == "-" else f"{int(astrip):,} ({kb(astrip)})",
                kb(budget), kb(ceiling), ", ".join(verdict)))

w = [max(len(str(r[i])) for r in out + [hdr]) for i in range(len(hdr))]
for r in [hdr] + out:
    print("  ".join(str(c).ljust(w[i]) if i in (0, 1, 7) else str(c).rjust(w[i])
                    for i, c in enumerate(r)).rstrip())
for m in over_budget:
    print(f"OVER BUDGET: {m}")
if check:
    for m in missing:
        print(f"size check: no budget line for {m}")
    for m in over_ceiling:
        print(f"size check FAILED: {m}")
    if over_ceiling or missing:
        sys.exit(1)
    print(f"size check passed: {len(out)} sizes within their ceilings"
          + (f" ({len(over_budget)} still over budget)" if over_budget else ""))
EOF

if [ "$top" -gt 0 ]; then
  for arch in "${arches[@]}"; do
    for s in "${sets[@]}"; do
      d="$(lib_dir "$s" "$arch")"
      echo
      echo "== $s ($arch): sections of the stripped .so"
      "$(tool "$arch" size)" -A "target/sets/$s/stripped-$arch/libtvm_runtime.so" |
        awk 'NR > 2 && $2 > 0 && $1 != "Total" { printf "  %-22s %10d\n", $1, $2 }' |
        sort -k2 -n -r | head -n 8
      "$(tool "$arch" nm)" -S --size-sort -C "$d/libtvm_runtime.so" |
        python3 -c '
import collections, re, sys

top = int(sys.argv[1])
path = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)::")

def owner(name):
    """The crate (and the tvm_runtime module) a symbol counts for."""
    n = name
    while True:
        n = n.lstrip("<&*( ")
        for p in ("dyn ", "mut ", "const ", "unsafe ", "extern ", "fn"):
            if n.startswith(p):
                n = n[len(p):]
                break
        else:
            break
    if n.startswith("core::ptr::drop_in_place<"):
        return owner(n[len("core::ptr::drop_in_place<"):])
    m = path.match(n)
    if not m:
        if n.startswith(("TVM", "tvm")):
            return "tvm_runtime", "c_api"
        return "[C / unmangled]", None
    crate = m.group(1)
    if crate == "tvm_runtime":
        mm = re.match(r"tvm_runtime::([A-Za-z_0-9]+)", n)
        mod = mm.group(1) if mm and n[mm.end():].startswith("::") else "(crate root)"
        return crate, mod
    return crate, None

crates, mods, syms = collections.Counter(), collections.Counter(), []
for line in sys.stdin:
    parts = line.rstrip("\n").split(" ", 3)
    if len(parts) < 4:
        continue
    size, kind, name = int(parts[1], 16), parts[2], parts[3]
    c, m = owner(name)
    crates[c] += size
    if m:
        mods[m] += size
    syms.append((size, kind, name))
total = sum(crates.values())
print(f"  symbols with a size: {total:,} B in all")
print(f"  by crate (top {top}):")
for c, n in crates.most_common(top):
    print(f"    {c:<28} {n:>10,} B  {100 * n / total:5.1f} %")
print(f"  by tvm_runtime module (top {top}):")
for m, n in mods.most_common(top):
    print(f"    {m:<28} {n:>10,} B  {100 * n / total:5.1f} %")
print(f"  largest symbols (top {top}):")
for size, kind, name in sorted(syms, reverse=True)[:top]:
    print(f"    {size:>8,} {kind} {name[:110]}")
' "$top"
    done
  done
fi
exit "$status"
