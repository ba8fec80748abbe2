"""The names of the environment variables trainyard reads and sets: one place for them.

Standard library only and no imports at all, so the launcher and the in-job helpers
(:mod:`trainyard.sdk.injob`, :mod:`trainyard.pipelines.notebook_run`), which run inside
jobs, can share the names without loading the server side. Where the settings of
trainyard itself are *read* is :mod:`trainyard.config`; this module only names them.
"""

# -- trainyard's own settings (read in trainyard.config) --------------------------
HOME = "TRAINYARD_HOME"                  # the state folder; default ~/.trainyard
SERVER = "TRAINYARD_SERVER"              # the server the SDK and CLI talk to; default the home's local one
SERVER_FILE = "TRAINYARD_SERVER_FILE"    # set in a job: the file ({"url": ...}) naming the servers' leader now, where
                                         # the SDK looks when the TRAINYARD_SERVER it was given stops answering
TOKEN = "TRAINYARD_TOKEN"                # the bearer token the SDK and CLI send
SERVER_TOKEN = "TRAINYARD_SERVER_TOKEN"  # the token `trainyard server` requires; removed from the env once read
RAY_ADDRESS = "RAY_ADDRESS"              # Ray's own variable: the cluster of engine `ray` when settings name none
SNAPSHOT_WARN = "TRAINYARD_SNAPSHOT_WARN"  # a code snapshot this big (e.g. 50Mi) lists its largest files
SNAPSHOT_MAX = "TRAINYARD_SNAPSHOT_MAX"    # a code snapshot over this (e.g. 512Mi) is refused
NODE_ROOT = "TRAINYARD_NODE_ROOT"        # on a Ray node: its own folder for attempts, caches and checkpoints
                                         # (default: the server's home path, which must then exist there)
LAUNCHER_STARTER = "TRAINYARD_LAUNCHER_STARTER"  # set by a Ray actor for its launcher: "pid:tid" of the actor's
                                         # thread that started it; a SIGTERM once that thread (or pid) is gone
                                         # means the actor died, not a cancel (not passed on)
SERVE_LANE = "TRAINYARD_SERVE_LANE"      # off (or 0, false, no) on the server: every /serve/ request goes the usual
                                         # way, none by the short one small requests take (api/serve_lane.py)
LAUNCH_MARKS = "TRAINYARD_LAUNCH_MARKS"      # set (to anything) on the server: each launcher writes marks.json, where
                                         # its time went (launch.marks, bench/latency.py --marks)
NOFILE_SOFT = "TRAINYARD_NOFILE_SOFT"    # set by the server that raised its open-file limit: the soft limit it was
                                         # given, which what runs jobs puts back (launch.fdlimit; not passed on)
TEST_CRASH_AT = "TRAINYARD_TEST_CRASH_AT"  # tests only: the server SIGKILLs itself at this crash point
                                         # (trainyard.crashpoints), to prove that a restart converges
TEST_SECOND_CRONS = "TRAINYARD_TEST_SECOND_CRONS"  # tests and bench only, set on the server: a schedule stored
                                         # with a six-field cron fires each second it names (cronsim reads seconds
                                         # first), not held paused: many real fires in a few seconds

# -- what a job sees (set by the launcher and the server, read by the in-job helpers) --
JOB_ID = "TRAINYARD_JOB_ID"
ATTEMPT = "TRAINYARD_ATTEMPT"
REPLICA = "TRAINYARD_REPLICA"
RENDEZVOUS_ID = "TRAINYARD_RENDEZVOUS_ID"
PARAMS = "TRAINYARD_PARAMS"              # the job's params as JSON
OUTPUT_DIR = "TRAINYARD_OUTPUT_DIR"
CHECKPOINT_DIR = "TRAINYARD_CHECKPOINT_DIR"
CHECKPOINT_SOCKET = "TRAINYARD_CHECKPOINT_SOCKET"  # set when checkpoints sync to an object store (trainyard.checkpoint_saved)
METRICS_FILE = "TRAINYARD_METRICS_FILE"
INPUT_PREFIX = "TRAINYARD_INPUT_"        # + the input's name, upper case: its local path
STEP = "TRAINYARD_STEP"                  # a pipeline step's name
OUTPUT_NAMES = "TRAINYARD_OUTPUT_NAMES"  # the named outputs a step must write, comma-separated
INDEX = "TRAINYARD_INDEX"                # a foreach item's index ...
ITEM = "TRAINYARD_ITEM"                  # ... and the item itself

# -- Dask clusters (services/clusters.py sets them on the cluster's jobs) ---------
DASK_CLUSTER = "TRAINYARD_DASK_CLUSTER"  # the cluster a scheduler or worker job belongs to
DASK_ROLE = "TRAINYARD_DASK_ROLE"        # scheduler | worker
DASK_HOST = "TRAINYARD_DASK_HOST"        # where the scheduler listens: its node's address ...
DASK_PORT = "TRAINYARD_DASK_PORT"        # ... a port free there, chosen at launch
DASK_DASHBOARD_PORT = "TRAINYARD_DASK_DASHBOARD_PORT"
# a scheduler's or worker's TLS identity (PEM), read by its launcher as secrets: its command writes them to files
DASK_TLS_CA, DASK_TLS_CERT, DASK_TLS_KEY = "TRAINYARD_DASK_TLS_CA", "TRAINYARD_DASK_TLS_CERT", "TRAINYARD_DASK_TLS_KEY"
SERVICE = "TRAINYARD_SERVICE"            # the service a replica job belongs to (its id)
SERVICE_VERSION = "TRAINYARD_SERVICE_VERSION"  # the service version a replica runs
SERVICE_HOST = "TRAINYARD_SERVICE_HOST"  # the address a service replica listens on (its node's)
SERVICE_PORT = "TRAINYARD_SERVICE_PORT"  # the port a service replica listens on, chosen at launch (also PORT)
# a replica attempt's own secret (read by its launcher as a secret): the /serve/ proxy and the service's probes send it
# in SERVICE_TOKEN_HEADER, so a replica can refuse whatever else on the node connects to its port
SERVICE_TOKEN = "TRAINYARD_SERVICE_TOKEN"
SERVICE_TOKEN_HEADER = "X-Trainyard-Service-Token"

# variables that make the dynamic loader, libc, a library or a shell read or run other files at start (code, message
# catalogues whose texts are printf formats, zone files): root's steps of the launcher never take a job's values
# (launch/runas.py), and no secret is put in one (spec/secret_refs.py)
LOADS_CODE = ("LD_", "GCONV_", "GLIBC_", "MALLOC_", "RESOLV_", "BASH_FUNC_", "LC_", "LIBMOUNT_", "LIBBLKID_",
              "LIBSMARTCOLS_", "TERMINFO")
LOADS_CODE_NAMES = frozenset({"LOCPATH", "NLSPATH", "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN", "NIS_PATH", "TZDIR",
                              "TZ", "LANG", "LANGUAGE", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS",
                              "CDPATH"})
