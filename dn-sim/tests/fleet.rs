//! `--datanodes N` (`net::fleet`): N DataNode identities in one process, each with its own UUID,
//! ports and store, routed by port; the admin listener's `/datanodes`, per-node stop and start,
//! and `/prom` labelled by node. On 127.0.0.1, port 0. (Registration of N identities with SCM:
//! tests/scm.rs.)

mod support;

use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as Client;
use common::proto::{
    BlockData, ChecksumData, ChecksumType, ChunkInfo, ContainerCommandRequestProto as Req,
    ContainerCommandResponseProto as Resp, CreateContainerRequestProto, DatanodeBlockId,
    GetBlockRequestProto, PutBlockRequestProto, ReadContainerRequestProto, Result as OzoneResult,
    Type, WriteChunkRequestProto,
};
use dn_sim::Config;
use dn_sim::net::fleet::{self, Fleet, FleetConfig};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::http;
use tonic::transport::Channel;

async fn three() -> Fleet {
    let base = Config {
        metrics_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..Config::loopback()
    };
    fleet::start(FleetConfig::new(base, 3).unwrap())
        .await
        .unwrap()
}

async fn client(addr: SocketAddr) -> Client<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    Client::new(channel)
}

async fn one(addr: SocketAddr, req: Req) -> Resp {
    let mut c = client(addr).await;
    let mut inbound = c.send(tokio_stream::once(req)).await.unwrap().into_inner();
    inbound.message().await.unwrap().expect("one response")
}

fn req(cmd: Type, container: i64, uuid: &str) -> Req {
    Req {
        cmd_type: cmd as i32,
        container_id: container,
        datanode_uuid: uuid.into(),
        ..Default::default()
    }
}

fn block_id(local_id: i64) -> DatanodeBlockId {
    DatanodeBlockId {
        container_id: 1,
        local_id,
        block_commit_sequence_id: None,
        replica_index: None,
    }
}

/// WriteChunk then PutBlock of 100 bytes as block `local_id` of container 1.
async fn write_block(addr: SocketAddr, uuid: &str, local_id: i64) {
    let data = vec![7u8; 100];
    let chunk = ChunkInfo {
        chunk_name: format!("{local_id}_chunk_1"),
        offset: 0,
        len: 100,
        checksum_data: ChecksumData {
            r#type: ChecksumType::None as i32,
            bytes_per_checksum: 16 << 10,
            checksums: vec![],
        },
        ..Default::default()
    };
    let mut w = req(Type::WriteChunk, 1, uuid);
    w.write_chunk = Some(WriteChunkRequestProto {
        block_id: block_id(local_id),
        chunk_data: Some(chunk.clone()),
        data: Some(data.into()),
        ..Default::default()
    });
    let r = one(addr, w).await;
    assert_eq!(r.result, OzoneResult::Success as i32, "{:?}", r.message);
    let mut p = req(Type::PutBlock, 1, uuid);
    p.put_block = Some(PutBlockRequestProto {
        block_data: BlockData {
            block_id: block_id(local_id),
            chunks: vec![chunk],
            ..Default::default()
        },
        ..Default::default()
    });
    let r = one(addr, p).await;
    assert_eq!(r.result, OzoneResult::Success as i32, "{:?}", r.message);
}

async fn get_block(addr: SocketAddr, uuid: &str, local_id: i64) -> OzoneResult {
    let mut g = req(Type::GetBlock, 1, uuid);
    g.get_block = Some(GetBlockRequestProto {
        block_id: block_id(local_id),
        ..Default::default()
    });
    OzoneResult::try_from(one(addr, g).await.result).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_identity_has_its_own_uuid_port_and_store() {
    let fleet = three().await;
    let views: Vec<_> = fleet.nodes().iter().map(|n| n.view()).collect();
    let mut uuids: Vec<_> = views.iter().map(|v| v.uuid.clone()).collect();
    let mut ports: Vec<_> = views.iter().map(|v| v.client.port()).collect();
    uuids.sort();
    uuids.dedup();
    ports.sort();
    ports.dedup();
    assert_eq!((uuids.len(), ports.len()), (3, 3));

    // Each port answers as its own node: a request naming another node's UUID for an EC replica
    // is refused with the answering node's UUID in the message.
    for (i, v) in views.iter().enumerate() {
        let mut create = req(Type::CreateContainer, 20, &v.uuid);
        create.create_container = Some(CreateContainerRequestProto {
            replica_index: Some(1),
            ..Default::default()
        });
        let r = one(v.client, create).await;
        assert_eq!(r.result, OzoneResult::Success as i32, "{:?}", r.message);
        let other = &views[(i + 1) % 3];
        let mut read = req(Type::ReadContainer, 20, &other.uuid);
        read.read_container = Some(ReadContainerRequestProto {});
        let r = one(v.client, read).await;
        assert_eq!(r.result, OzoneResult::InvalidArgument as i32);
        let message = r.message.unwrap();
        assert!(
            message.ends_with(&format!("current nodeId is: {} .", v.uuid)),
            "{message}"
        );
    }

    // A block written to node 0 is not on node 1.
    write_block(views[0].client, &views[0].uuid, 5).await;
    assert_eq!(
        get_block(views[0].client, &views[0].uuid, 5).await,
        OzoneResult::Success
    );
    assert_eq!(
        get_block(views[1].client, &views[1].uuid, 5).await,
        OzoneResult::NoSuchBlock
    );
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_lists_stops_and_starts_a_node_and_labels_prom() {
    let fleet = three().await;
    let admin = fleet.admin_addr().unwrap();
    let views: Vec<_> = fleet.nodes().iter().map(|n| n.view()).collect();
    write_block(views[1].client, &views[1].uuid, 9).await;

    let (status, body) = http(admin, "GET", "/datanodes", "").await;
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let nodes = list["datanodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    assert_eq!(nodes[1]["uuid"], views[1].uuid.as_str());
    assert_eq!(nodes[1]["client"], views[1].client.to_string().as_str());
    assert!(nodes.iter().all(|n| n["state"] == "running"));

    let (_, prom) = http(admin, "GET", "/prom", "").await;
    for v in &views {
        assert!(
            prom.contains(&format!("{{datanode=\"{}\"", v.uuid)),
            "no series of {}",
            v.uuid
        );
    }
    // One HELP per family however many nodes.
    let helps = prom
        .lines()
        .filter(|l| l.starts_with("# TYPE dn_sim_requests_total "))
        .count();
    assert_eq!(helps, 1);
    let (status, own) = http(admin, "GET", "/datanodes/2/prom", "").await;
    assert_eq!(status, 200);
    assert!(
        !own.contains("datanode=\""),
        "a node's own /prom is unlabelled"
    );

    let (status, body) = http(admin, "POST", "/datanodes/1/stop", "").await;
    assert_eq!(status, 200);
    assert!(body.contains("\"stopped\""), "{body}");
    // Its port refuses connections; the others serve.
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(views[1].client)
        .await
        .is_ok()
    {
        assert!(Instant::now() < deadline, "node 1 still accepts");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        get_block(views[0].client, &views[0].uuid, 9).await,
        OzoneResult::NoSuchBlock
    );
    let (_, prom) = http(admin, "GET", "/prom", "").await;
    assert!(!prom.contains(&views[1].uuid));
    assert_eq!(http(admin, "GET", "/datanodes/1/prom", "").await.0, 503);
    assert_eq!(http(admin, "POST", "/datanodes/7/stop", "").await.0, 404);

    let (status, body) = http(admin, "POST", "/datanodes/1/start", "").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"running\""), "{body}");
    // The same port again, and its store kept the block.
    assert_eq!(fleet.nodes()[1].view().client, views[1].client);
    assert_eq!(
        get_block(views[1].client, &views[1].uuid, 9).await,
        OzoneResult::Success
    );
    fleet.shutdown().await;
}

fn dn_sim() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dn-sim"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("DN_SIM_") || name.starts_with("OZONE-SITE.XML_") {
            cmd.env_remove(&*name);
        }
    }
    cmd
}

#[test]
fn the_binary_writes_every_identity_to_the_ready_file() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let store = format!("dir:{}", dir.path().join("store").display());
    let mut child = dn_sim()
        .args(["--datanodes", "3", "--listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "127.0.0.1:0", "--store", &store])
        .arg("--ready-file")
        .arg(&ready)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            break text;
        }
        assert!(child.try_wait().unwrap().is_none(), "dn-sim exited");
        assert!(Instant::now() < deadline, "no ready file");
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = child.kill();
    let _ = child.wait();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("datanode "))
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (i, line) in lines.iter().enumerate() {
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields[1], i.to_string());
        let kept =
            std::fs::read_to_string(dir.path().join(format!("store/dn-{i}/datanode.id"))).unwrap();
        assert_eq!(kept.trim(), format!("uuid: {}", fields[2]));
        assert!(fields[3].starts_with("client=127.0.0.1:"), "{line}");
    }
    // The single node's first line is identity 0's client port.
    let first = text.lines().next().unwrap();
    assert_eq!(
        first.strip_prefix("client "),
        lines[0].split(' ').nth(3).unwrap().strip_prefix("client=")
    );
}

#[test]
fn bad_datanodes_settings_are_one_line_errors_with_exit_code_2() {
    for args in [
        &["--datanodes", "0"][..],
        &["--datanodes", "x"][..],
        &[
            "--datanodes",
            "2",
            "--datanode-uuid",
            "6a1f8bd2-0d2c-4a8e-9a59-3c7d3a1c0b01",
        ][..],
        &[
            "--datanodes",
            "3",
            "--listen",
            "127.0.0.1:20000",
            "--ratis-listen",
            "127.0.0.1:20001",
        ][..],
    ] {
        let out = dn_sim().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("datanode"), "{err}");
    }
}
