//! The `outbound-client` world: the outbound A2A client component's bindings.

wit_bindgen::generate!({
    world: "outbound-client",
    path: "../../wit",
    with: {
        "wasi:io/poll@0.2.12": wasip2::io::poll,
        "wasi:io/error@0.2.12": wasip2::io::error,
        "wasi:io/streams@0.2.12": wasip2::io::streams,
        "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
        "wasi:http/types@0.2.12": wasip2::http::types,
        "wasi:http/outgoing-handler@0.2.12": wasip2::http::outgoing_handler,
    },
    generate_all,
    pub_export_macro: true,
    export_macro_name: "export_client",
    default_bindings_module: "a2a_guest::client",
});
