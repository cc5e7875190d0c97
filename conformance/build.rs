//! Compiles `proto/DatanodeClientProtocol.proto` with protox (no system `protoc`) into an encoded
//! `FileDescriptorSet` in `OUT_DIR`, which `src/proto.rs` includes and turns into a prost-reflect
//! `DescriptorPool`: requests are built from scenario JSON and answers rendered as JSON through it.

use std::path::PathBuf;

const PROTO_DIR: &str = "../proto";
const PROTO: &str = "DatanodeClientProtocol.proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO_DIR}/{PROTO}");
    println!("cargo:rerun-if-changed=build.rs");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut compiler = protox::Compiler::new([PROTO_DIR])?;
    compiler.include_imports(true);
    compiler.open_files([PROTO])?;
    std::fs::write(
        out_dir.join("datanode.fds"),
        compiler.encode_file_descriptor_set(),
    )?;
    Ok(())
}
