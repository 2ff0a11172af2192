// A proxy-wasm filter written with the AssemblyScript SDK (@solo-io/proxy-runtime).
// It runs unchanged in Envoy; in Weir it also reads the cache lookup's result through
// Weir's `weir_get_cache_status` foreign function.
//
// Every response gets `x-wasm-sdk: <the filter's configuration>` and, in Weir,
// `x-cache-lookup: fresh | stale | miss | bypass`.
export * from "@solo-io/proxy-runtime/proxy"; // the functions the host calls
import {
  RootContext, Context, registerRootContext, FilterHeadersStatusValues, stream_context,
} from "@solo-io/proxy-runtime";
import { proxy_call_foreign_function } from "@solo-io/proxy-runtime/imports";

// Where the host writes a result's address and length.
class Result {
  data: usize = 0;
  size: usize = 0;
}

// Calls one of Weir's foreign functions; "" when the host has none of that name.
function callForeign(name: string, args: string): string {
  const n = String.UTF8.encode(name);
  const a = String.UTF8.encode(args);
  const r = new Result();
  const status = proxy_call_foreign_function(
    changetype<usize>(n), n.byteLength, changetype<usize>(a), a.byteLength,
    changetype<usize>(r) + offsetof<Result>("data"),
    changetype<usize>(r) + offsetof<Result>("size"));
  if (status != 0 || r.size == 0) {
    return "";
  }
  return String.UTF8.decodeUnsafe(r.data, r.size);
}

class AddHeaderRoot extends RootContext {
  createContext(context_id: u32): Context {
    return new AddHeader(context_id, this);
  }
}

class AddHeader extends Context {
  constructor(context_id: u32, root_context: AddHeaderRoot) {
    super(context_id, root_context);
  }

  onResponseHeaders(a: u32, end_of_stream: bool): FilterHeadersStatusValues {
    stream_context.headers.response.add("x-wasm-sdk", this.root_context.getConfiguration());
    const lookup = callForeign("weir_get_cache_status", "");
    if (lookup != "") {
      stream_context.headers.response.add("x-cache-lookup", lookup);
    }
    return FilterHeadersStatusValues.Continue;
  }
}

registerRootContext((context_id: u32) => {
  return new AddHeaderRoot(context_id);
}, "add_header");
