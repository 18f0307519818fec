//! Names of upstream tools in toolgate: `SERVER__TOOL`, sanitised, with the per-server prefix modes and collision checks.
