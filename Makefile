# For PGXN clients (`pgxn install snowflake_id`) and whoever types make:
# builds and installs with cargo-pgrx, as the README's "From source" says
# (Rust 1.96 and cargo-pgrx 0.19.3 needed; scripts/setup.sh installs them).
#   make PG_CONFIG=/path/to/pg_config && sudo make install PG_CONFIG=...
PG_CONFIG ?= pg_config

all:
	cargo pgrx package --pg-config "$(PG_CONFIG)"

install:
	cargo pgrx install --release --pg-config "$(PG_CONFIG)"

.PHONY: all install
