#!/usr/bin/env bash
# Lints and renders the Helm chart and checks the safety default that
# matters most (NFR-APR01): auto-recovery is off unless the
# auto-recovery-local profile turns it on.
set -euo pipefail
helm="${HELM:?HELM must point at helm}"
chart="$(cd "$(dirname "$0")/.." && pwd)/charts/projection-recovery"
"${helm}" lint --strict "${chart}" >/dev/null
default="$("${helm}" template ci "${chart}")"
profile="$("${helm}" template ci "${chart}" -f "${chart}/values-auto-recovery-local.yaml")"
grep -q -- '--enable-auto-recovery=false' <<<"${default}" || { echo "chart-check: default values do not render --enable-auto-recovery=false" >&2; exit 1; }
grep -q -- '--enable-auto-recovery=true' <<<"${profile}" || { echo "chart-check: the auto-recovery-local profile does not enable auto-recovery" >&2; exit 1; }
[[ -f "${chart}/crds/recovery.projection.io_projectionrecoveries.yaml" ]] || { echo "chart-check: the chart has no CRD" >&2; exit 1; }
echo "chart-check: chart lints, renders, and keeps auto-recovery off by default"
