//! A norm kernel's extern "C" entry points (emit_norm.py, a string.Template): $N the name, $PARAMS
//! the launcher's parameters, $ASSIGN their copies into Args, $NAMES the arguments.

static Args make_args($PARAMS) {
  Args a = {};
$ASSIGN
  return a;
}
}  // namespace ${N}_impl

extern "C" int ${N}($PARAMS, cudaStream_t stream) {
  using namespace ${N}_impl;
  const Args a = make_args($NAMES);
  const bool vec = aligned(a, VMAX);
  run_device(a, vec, stream);
  return (int)cudaGetLastError();
}

extern "C" int ${N}_host($PARAMS, void* stream) {
  (void)stream;
  ${N}_impl::run_host(${N}_impl::make_args($NAMES));
  return 0;
}
