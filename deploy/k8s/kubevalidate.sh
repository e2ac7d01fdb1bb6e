#!/usr/bin/env bash
# kubevalidate.sh VERSION VENV: kubernetes-validate (PyPI, which bundles the
# Kubernetes JSON schemas), pinned, in a venv (pip caches in ~/.cache).
# Debian's python3 needs python3-venv for the venv (.ci/run installs it).
set -euo pipefail
version=$1 venv=$2
if "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -qF "$version"; then
	exit 0
fi
echo "helm-check: installing kubernetes-validate $version into $venv"
python3 -m venv --clear "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$version"
