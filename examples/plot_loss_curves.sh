#!/usr/bin/env sh
# Runs plot_loss_curves.py (its arguments passed on) with Debian's python3 and matplotlib,
# installing python3-matplotlib with apt-get first when it is missing: a plotting library people
# know, from the distribution rather than PyPI.
set -eu
python=/usr/bin/python3
if ! "$python" -c "import matplotlib" 2>/dev/null; then
  echo "plot_loss_curves.sh: installing python3-matplotlib" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get install -y --no-install-recommends python3-matplotlib >&2 ||
    { echo "plot_loss_curves.sh: could not install python3-matplotlib (apt-get install python3-matplotlib)" >&2; exit 1; }
fi
exec "$python" "$(dirname "$0")/plot_loss_curves.py" "$@"
