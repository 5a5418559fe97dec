//! A deliberately bad component for isolation tests. The `x-misbehave` request header picks:
//! `trap` (unreachable), `spin` (loops forever without calling the host), `alloc` (grows memory
//! without bound); anything else answers 200 `{"component":"misbehave"}` (a valid stand-in for
//! swap tests).

use wasip2::http::types::{Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam};

struct Component;

impl wasip2::exports::http::incoming_handler::Guest for Component {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let mode = request.headers().get("x-misbehave").into_iter().next().map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default();
        match mode.as_str() {
            "trap" => core::arch::wasm32::unreachable(),
            "spin" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            _ => {
                let response = OutgoingResponse::new(Fields::from_list(&[("content-type".into(), b"application/json".to_vec())]).unwrap());
                let body = response.body().unwrap();
                ResponseOutparam::set(out, Ok(response));
                let stream = body.write().unwrap();
                stream.blocking_write_and_flush(br#"{"component":"misbehave"}"#).unwrap();
                drop(stream);
                OutgoingBody::finish(body, None).unwrap();
            }
        }
    }
}

wasip2::http::proxy::export!(Component);
