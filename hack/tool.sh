#!/usr/bin/env bash
# hack/tool.sh CACHE PKG VERSION LINK: `go install PKG@VERSION` into CACHE
# unless it is there already, then link it at LINK. The cache sits outside
# the clone, so a clean clone (CI) links instead of compiling again.
set -euo pipefail
cache="$1" pkg="$2" version="$3" link="$4"
name="$(basename "${pkg}")-${version}"
if [[ ! -x "${cache}/${name}" ]]; then
	work="$(mktemp -d)"
	trap 'rm -rf "${work}"' EXIT
	echo "tool: building ${pkg}@${version}" >&2
	GOBIN="${work}" go install "${pkg}@${version}"
	mkdir -p "${cache}"
	# Copied in under a temporary name, then renamed: a build cut short never
	# leaves a binary that later runs would take for a finished one.
	mv "${work}/$(basename "${pkg}")" "${cache}/${name}.tmp"
	mv "${cache}/${name}.tmp" "${cache}/${name}"
fi
mkdir -p "$(dirname "${link}")"
ln -sf "${cache}/${name}" "${link}"
