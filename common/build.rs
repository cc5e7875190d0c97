//! Compiles `proto/DatanodeClientProtocol.proto` with protox (pure Rust, no system `protoc`) and
//! generates two things into `OUT_DIR`:
//! - the prost message types and tonic client/server stubs (`hadoop.hdds.datanode.rs`), wired to
//!   `crate::codec::OzoneCodec`, which enforces proto2 `required` fields as Ozone's Java parser does;
//! - `wire_spec.rs`, a table of every message's required fields and nested message fields, read from
//!   the descriptor so that it can never drift from the `.proto`;
//! - from `proto/ratis/`, Ratis's client protocol (`ratis.common.rs`, `ratis.grpc.rs`): proto3
//!   messages and the `RaftClientProtocolService` stubs, with prost's standard codec;
//! - from `proto/hadoop/` and `proto/hdds/`, Hadoop RPC's headers (`hadoop.common.rs`) and the
//!   SCM–DataNode protocol with `hdds.proto` (`hadoop.hdds.rs`): messages only, no stubs (Hadoop
//!   RPC is not gRPC; `crate::hrpc` frames them).

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

const PROTO: &str = "../proto/DatanodeClientProtocol.proto";
/// Ratis's client protocol (`proto/ratis/`), proto3, with prost's own codec.
const RATIS_PROTOS: [&str; 2] = ["../proto/ratis/Raft.proto", "../proto/ratis/Grpc.proto"];
/// Hadoop RPC (`proto/hadoop/`) and the SCM–DataNode protocol (`proto/hdds/`), Ozone 2.2.0's.
const HADOOP_PROTOS: [&str; 3] = [
    "RpcHeader.proto",
    "IpcConnectionContext.proto",
    "ProtobufRpcEngine.proto",
];
const SCM_PROTOS: [&str; 2] = ["hdds.proto", "ScmServerDatanodeHeartbeatProtocol.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO}");
    println!("cargo:rerun-if-changed=build.rs");
    for proto in RATIS_PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    for proto in HADOOP_PROTOS {
        println!("cargo:rerun-if-changed=../proto/hadoop/{proto}");
    }
    for proto in SCM_PROTOS {
        println!("cargo:rerun-if-changed=../proto/hdds/{proto}");
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);

    let mut compiler = protox::Compiler::new(["../proto"])?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_files(["DatanodeClientProtocol.proto"])?;
    let fds = compiler.file_descriptor_set();
    std::fs::write(out_dir.join("wire_spec.rs"), wire_spec(&fds))?;

    tonic_prost_build::configure()
        .bytes(".")
        .build_transport(false)
        .codec_path("crate::codec::OzoneCodec")
        .compile_fds(fds)?;

    let mut ratis = protox::Compiler::new(["../proto/ratis"])?;
    ratis.include_imports(true);
    ratis.open_files(["Raft.proto", "Grpc.proto"])?;
    tonic_prost_build::configure()
        .bytes(".")
        .build_transport(false)
        .compile_fds(ratis.file_descriptor_set())?;

    let mut hadoop = protox::Compiler::new(["../proto/hadoop", "../proto/hdds"])?;
    hadoop.include_imports(true);
    hadoop.open_files(HADOOP_PROTOS.iter().chain(SCM_PROTOS.iter()))?;
    tonic_prost_build::configure()
        .bytes(".")
        .build_client(false)
        .build_server(false)
        .build_transport(false)
        .compile_fds(hadoop.file_descriptor_set())?;
    Ok(())
}

struct Msg {
    required: Vec<i32>,
    /// (field number, full name of the nested message type)
    nested: Vec<(i32, String)>,
    /// (field number, full name of the enum) for required enum fields
    required_enums: Vec<(i32, String)>,
}

fn collect(prefix: &str, d: &DescriptorProto, msgs: &mut BTreeMap<String, Msg>) {
    let name = format!("{prefix}.{}", d.name());
    let mut m = Msg {
        required: vec![],
        nested: vec![],
        required_enums: vec![],
    };
    for f in &d.field {
        let required = f.label() == Label::Required;
        if required {
            m.required.push(f.number());
        }
        match f.r#type() {
            Type::Message => m.nested.push((f.number(), f.type_name().to_string())),
            Type::Enum if required => m
                .required_enums
                .push((f.number(), f.type_name().to_string())),
            _ => {}
        }
    }
    for n in &d.nested_type {
        collect(&name, n, msgs);
    }
    msgs.insert(name, m);
}

fn wire_spec(fds: &FileDescriptorSet) -> String {
    let mut msgs = BTreeMap::new();
    let mut enums: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for file in &fds.file {
        let pkg = format!(".{}", file.package());
        for d in &file.message_type {
            collect(&pkg, d, &mut msgs);
            for e in &d.enum_type {
                let values = e.value.iter().map(|v| v.number()).collect();
                enums.insert(format!("{pkg}.{}.{}", d.name(), e.name()), values);
            }
        }
        for e in &file.enum_type {
            let values = e.value.iter().map(|v| v.number()).collect();
            enums.insert(format!("{pkg}.{}", e.name()), values);
        }
    }
    let index: BTreeMap<&str, usize> = msgs
        .keys()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    let mut s =
        String::from("// @generated by common/build.rs from proto/DatanodeClientProtocol.proto\n");
    s.push_str("pub(crate) static MESSAGE_SPECS: &[MessageSpec] = &[\n");
    for (name, m) in &msgs {
        let nested: Vec<String> = m
            .nested
            .iter()
            .map(|(n, t)| format!("({n}, {})", index[t.as_str()]))
            .collect();
        let enum_fields: Vec<String> = m
            .required_enums
            .iter()
            .map(|(n, t)| format!("({n}, &{:?})", enums[t.as_str()]))
            .collect();
        writeln!(
            s,
            "    MessageSpec {{ name: {:?}, required: &{:?}, nested: &[{}], required_enums: &[{}] }},",
            &name[1..],
            m.required,
            nested.join(", "),
            enum_fields.join(", ")
        )
        .unwrap();
    }
    s.push_str("];\n");
    for (name, i) in &index {
        let short = name.rsplit('.').next().unwrap();
        if name.matches('.').count() == 4 {
            // top-level message of package hadoop.hdds.datanode
            writeln!(s, "#[allow(non_upper_case_globals, dead_code)]\npub(crate) const SPEC_{short}: usize = {i};").unwrap();
        }
    }
    s
}
