package org.ozonedn.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.hadoop.hdds.client.BlockID;
import org.apache.hadoop.hdds.client.RatisReplicationConfig;
import org.apache.hadoop.hdds.client.ReplicationConfig;
import org.apache.hadoop.hdds.client.StandaloneReplicationConfig;
import org.apache.hadoop.hdds.conf.OzoneConfiguration;
import org.apache.hadoop.hdds.protocol.DatanodeDetails;
import org.apache.hadoop.hdds.protocol.datanode.proto.ContainerProtos;
import org.apache.hadoop.hdds.protocol.datanode.proto.ContainerProtos.BlockData;
import org.apache.hadoop.hdds.protocol.datanode.proto.ContainerProtos.ChecksumType;
import org.apache.hadoop.hdds.protocol.datanode.proto.ContainerProtos.ChunkInfo;
import org.apache.hadoop.hdds.protocol.datanode.proto.ContainerProtos.ContainerCommandRequestProto;
import org.apache.hadoop.hdds.protocol.datanode.proto.ContainerProtos.ContainerCommandResponseProto;
import org.apache.hadoop.hdds.protocol.datanode.proto.ContainerProtos.DatanodeBlockID;
import org.apache.hadoop.hdds.protocol.datanode.proto.ContainerProtos.ReadChunkResponseProto;
import org.apache.hadoop.hdds.protocol.proto.HddsProtos;
import org.apache.hadoop.hdds.scm.ContainerClientMetrics;
import org.apache.hadoop.hdds.scm.OzoneClientConfig;
import org.apache.hadoop.hdds.scm.StreamBufferArgs;
import org.apache.hadoop.hdds.scm.XceiverClientCreator;
import org.apache.hadoop.hdds.scm.XceiverClientGrpc;
import org.apache.hadoop.hdds.scm.XceiverClientRatis;
import org.apache.hadoop.hdds.scm.XceiverClientReply;
import org.apache.hadoop.hdds.scm.XceiverClientSpi;
import org.apache.hadoop.hdds.scm.XceiverClientSpi.Validator;
import org.apache.hadoop.hdds.scm.container.common.helpers.ContainerNotOpenException;
import org.apache.hadoop.hdds.scm.container.common.helpers.StorageContainerException;
import org.apache.hadoop.hdds.scm.pipeline.Pipeline;
import org.apache.hadoop.hdds.scm.pipeline.PipelineID;
import org.apache.hadoop.hdds.scm.storage.BlockInputStream;
import org.apache.hadoop.hdds.scm.storage.BlockOutputStream;
import org.apache.hadoop.hdds.scm.storage.BufferPool;
import org.apache.hadoop.hdds.scm.storage.ContainerProtocolCalls;
import org.apache.hadoop.hdds.scm.storage.RatisBlockOutputStream;
import org.apache.hadoop.ozone.common.Checksum;
import org.apache.hadoop.ozone.common.ChecksumData;
import org.apache.ratis.thirdparty.com.google.protobuf.ByteString;

/**
 * Ozone's own client against a DataNode (dn-sim, or a real one): {@code XceiverClientGrpc} over a
 * STANDALONE pipeline built here (one {@code DatanodeDetails} whose STANDALONE port is the target's;
 * no SCM, no Ratis), the calls of {@code ContainerProtocolCalls}, checksums computed and verified
 * with Ozone's {@code Checksum}, and one block through {@code BlockOutputStream} and
 * {@code BlockInputStream}.
 *
 * <p>Prints one line per check, {@code PASS name} or {@code FAIL name: why}, then
 * {@code N passed, M failed}; exits 0 when nothing failed, 1 otherwise, 2 on bad arguments.
 *
 * <p>Arguments: {@code --target HOST:PORT} (required), {@code --container ID} (a container the
 * target does not have yet, created here; default 4242), {@code --block-container ID} (an open
 * existing container for the stream block; default 1), {@code --big-block-mb N} (the stream block's
 * size; default 64, 0 skips it), {@code --datanode-uuid UUID} (the pipeline node's UUID; default
 * dn-sim's).
 */
public final class ClientCheck {

  private static final PrintStream OUT = System.out;
  private int passed;
  private int failed;

  private final XceiverClientSpi client;
  private final Pipeline pipeline;
  private final OzoneConfiguration conf;
  private final Random random = new Random(12);

  private ClientCheck(XceiverClientSpi client, Pipeline pipeline, OzoneConfiguration conf) {
    this.client = client;
    this.pipeline = pipeline;
    this.conf = conf;
  }

  @FunctionalInterface
  private interface Check {
    /** Returns null on success or throws; a returned string is the failure's reason. */
    String run() throws Exception;
  }

  private boolean check(String name, Check c) {
    String why;
    try {
      why = c.run();
    } catch (Throwable t) {
      why = describe(t);
    }
    if (why == null) {
      passed++;
      OUT.println("PASS " + name);
      return true;
    }
    failed++;
    OUT.println("FAIL " + name + ": " + why.replace('\n', ' '));
    return false;
  }

  private static String describe(Throwable t) {
    StringBuilder sb = new StringBuilder();
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (sb.length() > 0) {
        sb.append(" <- ");
      }
      sb.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
      if (c instanceof StorageContainerException) {
        sb.append(" [result ").append(((StorageContainerException) c).getResult()).append(']');
      }
      if (c.getCause() == c) {
        break;
      }
    }
    return sb.toString();
  }

  private static StorageContainerException findSce(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (c instanceof StorageContainerException) {
        return (StorageContainerException) c;
      }
      if (c.getCause() == c) {
        break;
      }
    }
    return null;
  }

  public static void main(String[] args) throws Exception {
    String target = null;
    long newContainer = 4242;
    long blockContainer = 1;
    int bigBlockMb = 64;
    String uuid = "00000000-0000-4000-8000-00000000d5d5";
    String ratisTarget = null;
    UUID pipelineId = UUID.fromString("00000000-0000-4000-8000-000000009858");
    long closeContainer = 9;
    try {
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException(a + " needs a value");
        }
        String v = args[++i];
        switch (a) {
          case "--target": target = v; break;
          case "--container": newContainer = Long.parseLong(v); break;
          case "--block-container": blockContainer = Long.parseLong(v); break;
          case "--big-block-mb": bigBlockMb = Integer.parseInt(v); break;
          case "--datanode-uuid": uuid = UUID.fromString(v).toString(); break;
          case "--ratis": ratisTarget = v; break;
          case "--pipeline-id": pipelineId = UUID.fromString(v); break;
          case "--close-container": closeContainer = Long.parseLong(v); break;
          default: throw new IllegalArgumentException("unknown argument " + a);
        }
      }
      if (target == null || target.lastIndexOf(':') < 0) {
        throw new IllegalArgumentException("--target HOST:PORT is required");
      }
    } catch (IllegalArgumentException e) {
      System.err.println("client-check: " + e.getMessage());
      System.exit(2);
      return;
    }
    String host = target.substring(0, target.lastIndexOf(':'));
    int port = Integer.parseInt(target.substring(target.lastIndexOf(':') + 1));

    // The DataNode as SCM would describe it: only the STANDALONE port matters to XceiverClientGrpc.
    DatanodeDetails dn = DatanodeDetails.newBuilder()
        .setUuid(UUID.fromString(uuid))
        .setHostName(host)
        .setIpAddress(host)
        .addPort(DatanodeDetails.newStandalonePort(port))
        .setPersistedOpState(HddsProtos.NodeOperationalState.IN_SERVICE)
        .setPersistedOpStateExpiry(0)
        .build();
    Pipeline pipeline = Pipeline.newBuilder()
        .setId(PipelineID.randomId())
        .setReplicationConfig(StandaloneReplicationConfig.getInstance(
            HddsProtos.ReplicationFactor.ONE))
        .setState(Pipeline.PipelineState.OPEN)
        .setNodes(Collections.singletonList(dn))
        .build();
    OzoneConfiguration conf = new OzoneConfiguration();
    XceiverClientGrpc client = new XceiverClientGrpc(pipeline, conf);
    int status;
    try {
      client.connect();
      ClientCheck cc = new ClientCheck(client, pipeline, conf);
      cc.runAll(newContainer, blockContainer, bigBlockMb);
      int passed = cc.passed;
      int failed = cc.failed;
      if (ratisTarget != null) {
        ClientCheck rc = ratisCheck(ratisTarget, pipelineId, uuid, conf);
        try {
          rc.runRatis(blockContainer, closeContainer, client, pipeline, bigBlockMb);
        } finally {
          rc.client.close();
        }
        passed += rc.passed;
        failed += rc.failed;
      }
      OUT.println(passed + " passed, " + failed + " failed");
      status = failed == 0 ? 0 : 1;
    } finally {
      client.close();
    }
    OUT.flush();
    // Netty's and the metrics system's threads may linger.
    System.exit(status);
  }

  /**
   * Ozone's {@code XceiverClientRatis} over a RATIS/ONE pipeline built by hand, as SCM would
   * describe it: the pipeline's ID is the Raft group's, the node's RATIS port its client port.
   */
  private static ClientCheck ratisCheck(String target, UUID pipelineId, String uuid,
      OzoneConfiguration conf) throws Exception {
    String host = target.substring(0, target.lastIndexOf(':'));
    int port = Integer.parseInt(target.substring(target.lastIndexOf(':') + 1));
    DatanodeDetails dn = DatanodeDetails.newBuilder()
        .setUuid(UUID.fromString(uuid))
        .setHostName(host)
        .setIpAddress(host)
        .addPort(DatanodeDetails.newRatisPort(port))
        .setPersistedOpState(HddsProtos.NodeOperationalState.IN_SERVICE)
        .setPersistedOpStateExpiry(0)
        .build();
    Pipeline pipeline = Pipeline.newBuilder()
        .setId(PipelineID.valueOf(pipelineId))
        .setReplicationConfig(RatisReplicationConfig.getInstance(HddsProtos.ReplicationFactor.ONE))
        .setState(Pipeline.PipelineState.OPEN)
        .setNodes(Collections.singletonList(dn))
        .setLeaderId(dn.getID())
        .build();
    XceiverClientRatis ratis = XceiverClientRatis.newXceiverClientRatis(pipeline, conf);
    ratis.connect();
    return new ClientCheck(ratis, pipeline, conf);
  }

  /** The Ratis checks: echo both ways, writes with their log index and commit watch, a closed container. */
  private void runRatis(long c, long closing, XceiverClientSpi grpc, Pipeline grpcPipeline,
      int bigBlockMb) throws Exception {
    check("Ratis: echo as a Raft write (512-byte answer)", () -> {
      ContainerProtos.EchoResponseProto r = ContainerProtocolCalls.echo(client, "", c,
          ByteString.copyFrom(randomBytes(1024)), 512, 0, false);
      return r.getPayload().size() == 512 ? null : "answer payload " + r.getPayload().size() + " bytes";
    });
    check("Ratis: echo read-only as a Raft read", () -> {
      ContainerProtos.EchoResponseProto r = ContainerProtocolCalls.echo(client, "", c,
          ByteString.EMPTY, 0, 0, true);
      return r.getPayload().size() == 0 ? null : "answer payload " + r.getPayload().size() + " bytes";
    });
    Written[] w = new Written[1];
    long[] bcsId = new long[1];
    check("Ratis: WriteChunk x2 + PutBlock, watchForCommit of the PutBlock's log index", () -> {
      w[0] = writeChunks(new BlockID(c, 301), new int[] {64 << 10, 50_000}, ChecksumType.CRC32, 16 << 10);
      XceiverClientReply put = ContainerProtocolCalls.putBlockAsync(client, blockData(w[0]), true, null);
      ok(put.getResponse().get());
      long index = put.getLogIndex();
      if (index <= 0) {
        return "PutBlock's reply has log index " + index;
      }
      bcsId[0] = index;
      long watched = client.watchForCommit(index).get().getLogIndex();
      return watched >= index ? null : "watchForCommit(" + index + ") returned " + watched;
    });
    check("Ratis: GetBlock as a Raft read lists the block's chunks", () -> {
      if (w[0] == null) {
        return "no block was written";
      }
      ContainerCommandRequestProto get = ContainerCommandRequestProto.newBuilder()
          .setCmdType(ContainerProtos.Type.GetBlock)
          .setContainerID(c)
          .setDatanodeUuid(pipeline.getFirstNode().getUuidString())
          .setGetBlock(ContainerProtos.GetBlockRequestProto.newBuilder()
              .setBlockID(w[0].id.getDatanodeBlockIDProtobuf()))
          .build();
      ContainerCommandResponseProto r = client.sendCommand(get);
      ok(r);
      int chunks = r.getGetBlock().getBlockData().getChunksCount();
      return chunks == 2 ? null : chunks + " chunks, not 2";
    });
    check("Ratis PutBlock's log index is the bcsId a GetBlock over gRPC may name", () -> {
      if (bcsId[0] == 0) {
        return "no block was put";
      }
      ContainerCommandRequestProto get = ContainerCommandRequestProto.newBuilder()
          .setCmdType(ContainerProtos.Type.GetBlock)
          .setContainerID(c)
          .setDatanodeUuid(pipeline.getFirstNode().getUuidString())
          .setGetBlock(ContainerProtos.GetBlockRequestProto.newBuilder()
              .setBlockID(w[0].id.getDatanodeBlockIDProtobuf().toBuilder()
                  .setBlockCommitSequenceId(bcsId[0])))
          .build();
      ContainerCommandResponseProto r = grpc.sendCommand(get);
      ok(r);
      long stored = r.getGetBlock().getBlockData().getBlockID().getBlockCommitSequenceId();
      return stored == bcsId[0] ? null : "stored bcsId " + stored + ", not " + bcsId[0];
    });
    if (bigBlockMb > 0) {
      // Ozone's default buffers (4 MB each, a PutBlock every 16 MB, 32 MB in all): for a block
      // above 32 MB the writer goes on only as the commit watcher's watches free what the
      // DataNode has committed.
      streamBlock(c, 202, bigBlockMb, grpcPipeline, true, 32L << 20);
    }
    check("Ratis: a closed container refuses a write (ContainerNotOpenException)", () -> {
      ContainerProtocolCalls.closeContainer(client, closing, null);
      try {
        ContainerProtocolCalls.echo(client, "", closing, ByteString.EMPTY, 0, 0, false);
        return "the write to closed container " + closing + " succeeded";
      } catch (Exception e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
          if (t instanceof ContainerNotOpenException) {
            return null;
          }
          if (t.getCause() == t) {
            break;
          }
        }
        return describe(e);
      }
    });
  }

  private byte[] randomBytes(int n) {
    byte[] b = new byte[n];
    random.nextBytes(b);
    return b;
  }

  private static void ok(ContainerCommandResponseProto r) throws StorageContainerException {
    ContainerProtocolCalls.validateContainerResponse(r);
  }

  /** A block written chunk by chunk: its data and its chunks as sent. */
  private static final class Written {
    final BlockID id;
    final byte[] data;
    final List<ChunkInfo> chunks = new ArrayList<>();

    Written(BlockID id, byte[] data) {
      this.id = id;
      this.data = data;
    }
  }

  private Written writeChunks(BlockID id, int[] sizes, ChecksumType type, int bytesPerChecksum)
      throws Exception {
    int total = Arrays.stream(sizes).sum();
    Written w = new Written(id, randomBytes(total));
    Checksum checksum = new Checksum(type, bytesPerChecksum);
    int off = 0;
    for (int i = 0; i < sizes.length; i++) {
      ChecksumData cd = checksum.computeChecksum(w.data, off, sizes[i]);
      ChunkInfo chunk = ChunkInfo.newBuilder()
          .setChunkName(id.getLocalID() + "_chunk_" + (i + 1))
          .setOffset(off)
          .setLen(sizes[i])
          .setChecksumData(cd.getProtoBufMessage())
          .build();
      XceiverClientReply reply = ContainerProtocolCalls.writeChunkAsync(client, chunk, id,
          ByteString.copyFrom(w.data, off, sizes[i]), null, 0, null, false);
      ContainerCommandResponseProto r = reply.getResponse().get();
      ok(r);
      w.chunks.add(chunk);
      off += sizes[i];
    }
    return w;
  }

  private BlockData blockData(Written w) {
    return BlockData.newBuilder()
        .setBlockID(w.id.getDatanodeBlockIDProtobuf())
        .addMetadata(ContainerProtos.KeyValue.newBuilder().setKey("TYPE").setValue("KEY"))
        .addAllChunks(w.chunks)
        .setSize(w.data.length)
        .build();
  }

  /** The validators ChunkInputStream uses: result, length, then Ozone's checksum verification. */
  private static List<Validator> readValidators(ChunkInfo whole) {
    return ContainerProtocolCalls.toValidatorList((request, response) -> {
      ChunkInfo asked = request.getReadChunk().getChunkData();
      ReadChunkResponseProto rc = response.getReadChunk();
      List<ByteString> bufs = rc.hasData()
          ? Collections.singletonList(rc.getData())
          : rc.getDataBuffers().getBuffersList();
      long len = bufs.stream().mapToLong(ByteString::size).sum();
      if (len != asked.getLen()) {
        throw new IOException("read " + len + " bytes, asked " + asked.getLen());
      }
      ChecksumData cd = ChecksumData.getFromProtoBuf(whole.getChecksumData());
      int startIndex = (int) ((asked.getOffset() - whole.getOffset()) / cd.getBytesPerChecksum());
      Checksum.verifyChecksum(bufs, cd, startIndex);
    });
  }

  private static byte[] concat(ReadChunkResponseProto rc) {
    if (rc.hasData()) {
      return rc.getData().toByteArray();
    }
    ByteString all = ByteString.EMPTY;
    for (ByteString b : rc.getDataBuffers().getBuffersList()) {
      all = all.concat(b);
    }
    return all.toByteArray();
  }

  private static String compareBytes(byte[] expected, int off, byte[] got) {
    byte[] want = Arrays.copyOfRange(expected, off, off + Math.min(got.length, expected.length - off));
    if (got.length != want.length || !Arrays.equals(want, got)) {
      return "data differs (" + got.length + " bytes read)";
    }
    return null;
  }

  /** ReadChunk of every chunk (whole) and of a part of one, V0 or V1, checksums verified. */
  private String readAll(Written w, List<ChunkInfo> chunks, ContainerProtos.ReadChunkVersion v)
      throws Exception {
    DatanodeBlockID bid = w.id.getDatanodeBlockIDProtobuf();
    List<ChunkInfo> asks = new ArrayList<>();
    List<ChunkInfo> wholes = new ArrayList<>();
    for (ChunkInfo c : chunks) {
      asks.add(c);
      wholes.add(c);
    }
    // A part of the first chunk, on checksum boundaries, as ChunkInputStream asks for a seek.
    ChunkInfo first = chunks.get(0);
    int bpc = first.getChecksumData().getBytesPerChecksum();
    if (first.getLen() >= 3L * bpc) {
      asks.add(first.toBuilder().setOffset(first.getOffset() + bpc).setLen(2L * bpc).build());
      wholes.add(first);
    }
    for (int i = 0; i < asks.size(); i++) {
      ChunkInfo ask = asks.get(i);
      ReadChunkResponseProto rc;
      if (v == ContainerProtos.ReadChunkVersion.V1) {
        rc = ContainerProtocolCalls.readChunk(client, ask, bid, readValidators(wholes.get(i)), null);
      } else {
        ContainerCommandRequestProto req = ContainerCommandRequestProto.newBuilder()
            .setCmdType(ContainerProtos.Type.ReadChunk)
            .setContainerID(w.id.getContainerID())
            .setDatanodeUuid(pipeline.getFirstNode().getUuidString())
            .setReadChunk(ContainerProtos.ReadChunkRequestProto.newBuilder()
                .setBlockID(bid).setChunkData(ask)
                .setReadChunkVersion(ContainerProtos.ReadChunkVersion.V0))
            .build();
        ContainerCommandResponseProto r = client.sendCommand(req, readValidators(wholes.get(i)));
        rc = r.getReadChunk();
        if (!rc.hasData()) {
          return "V0 answer without `data` (dataBuffers: " + rc.hasDataBuffers() + ")";
        }
      }
      String d = compareBytes(w.data, (int) ask.getOffset(), concat(rc));
      if (d != null) {
        return "chunk " + ask.getChunkName() + " at " + ask.getOffset() + ": " + d;
      }
      if (!rc.getChunkData().getChunkName().equals(ask.getChunkName())) {
        return "answer's chunkData names " + rc.getChunkData().getChunkName();
      }
    }
    return null;
  }

  private void runAll(long newContainer, long blockContainer, int bigBlockMb) throws Exception {
    // createContainer on an ID the DataNode does not have.
    boolean created = check("createContainer " + newContainer, () -> {
      ContainerProtocolCalls.createContainer(client, newContainer, null);
      ContainerProtos.ReadContainerResponseProto rc =
          ContainerProtocolCalls.readContainer(client, newContainer, null);
      if (rc.getContainerData().getState() != ContainerProtos.ContainerDataProto.State.OPEN) {
        return "readContainer says " + rc.getContainerData().getState();
      }
      return null;
    });
    check("createContainer again is CONTAINER_ALREADY_EXISTS", () -> {
      try {
        ContainerProtocolCalls.createContainer(client, newContainer, null);
        return "succeeded";
      } catch (IOException e) {
        StorageContainerException sce = findSce(e);
        if (sce == null || sce.getResult() != ContainerProtos.Result.CONTAINER_ALREADY_EXISTS) {
          return describe(e);
        }
        return null;
      }
    });
    long c = created ? newContainer : blockContainer;

    // payloadSizeResp counts bytes on the DataNode (ContainerCommandResponseBuilders.getEchoResponse
    // sends that many random bytes), whatever ContainerProtocolCalls.echo's parameter name says (KB).
    check("echo (1 KB payload, 4096-byte answer, 200 ms sleep)", () -> {
      long t0 = System.nanoTime();
      ContainerProtos.EchoResponseProto r = ContainerProtocolCalls.echo(client, "", c,
          ByteString.copyFrom(randomBytes(1024)), 4096, 200, true);
      long ms = (System.nanoTime() - t0) / 1_000_000;
      if (r.getPayload().size() != 4096) {
        return "answer payload " + r.getPayload().size() + " bytes, not 4096";
      }
      if (ms < 200) {
        return "answered after " + ms + " ms, before the 200 ms sleep";
      }
      return null;
    });
    check("echo (empty, no answer payload, no sleep, not read-only)", () -> {
      ContainerProtos.EchoResponseProto r =
          ContainerProtocolCalls.echo(client, "", c, ByteString.EMPTY, 0, 0, false);
      return r.getPayload().size() == 0 ? null : "answer payload " + r.getPayload().size() + " bytes";
    });

    int[] crc32Sizes = {1 << 20, 1 << 20, 300_001};
    int[] crc32cSizes = {256 << 10, 256 << 10, 256 << 10, 100_000};
    Written[] w = new Written[2];
    check("WriteChunk x3 CRC32 (16 KB per checksum)", () -> {
      w[0] = writeChunks(new BlockID(c, 101), crc32Sizes, ChecksumType.CRC32, 16 << 10);
      return null;
    });
    check("WriteChunk x4 CRC32C (64 KB per checksum)", () -> {
      w[1] = writeChunks(new BlockID(c, 102), crc32cSizes, ChecksumType.CRC32C, 64 << 10);
      return null;
    });

    @SuppressWarnings("unchecked")
    List<ChunkInfo>[] got = new List[2];
    for (int i = 0; i < 2; i++) {
      final int k = i;
      String kind = i == 0 ? "CRC32" : "CRC32C";
      if (w[k] == null) {
        continue;
      }
      check("PutBlock " + kind, () -> {
        XceiverClientReply reply =
            ContainerProtocolCalls.putBlockAsync(client, blockData(w[k]), true, null);
        ContainerCommandResponseProto r = reply.getResponse().get();
        ok(r);
        ContainerProtos.GetCommittedBlockLengthResponseProto cl =
            r.getPutBlock().getCommittedBlockLength();
        if (cl.getBlockLength() != w[k].data.length) {
          return "committedBlockLength " + cl.getBlockLength() + ", not " + w[k].data.length;
        }
        return null;
      });
      check("GetBlock " + kind + " matches PutBlock", () -> {
        ContainerProtos.GetBlockResponseProto r = ContainerProtocolCalls.getBlock(client, w[k].id,
            null, Collections.emptyMap());
        BlockData bd = r.getBlockData();
        if (bd.getBlockID().getContainerID() != c || bd.getBlockID().getLocalID() != w[k].id.getLocalID()) {
          return "blockID " + bd.getBlockID();
        }
        if (bd.getSize() != w[k].data.length) {
          return "size " + bd.getSize() + ", not " + w[k].data.length;
        }
        if (!bd.getChunksList().equals(w[k].chunks)) {
          return "chunks differ: got " + bd.getChunksList() + " put " + w[k].chunks;
        }
        if (!bd.getMetadataList().contains(
            ContainerProtos.KeyValue.newBuilder().setKey("TYPE").setValue("KEY").build())) {
          return "metadata " + bd.getMetadataList();
        }
        got[k] = bd.getChunksList();
        return null;
      });
      List<ChunkInfo> chunks = got[k] != null ? got[k] : w[k].chunks;
      check("ReadChunk V1 " + kind + " (client checksum verification)",
          () -> readAll(w[k], chunks, ContainerProtos.ReadChunkVersion.V1));
      check("ReadChunk V0 " + kind + " (client checksum verification)",
          () -> readAll(w[k], chunks, ContainerProtos.ReadChunkVersion.V0));
    }

    check("ListBlock lists the blocks put", () -> {
      ContainerProtos.ListBlockResponseProto r = ContainerProtocolCalls.listBlock(client, c, null, 10, null);
      List<Long> ids = new ArrayList<>();
      for (BlockData bd : r.getBlockDataList()) {
        ids.add(bd.getBlockID().getLocalID());
      }
      List<Long> want = new ArrayList<>();
      for (Written x : w) {
        if (x != null) {
          want.add(x.id.getLocalID());
        }
      }
      return ids.equals(want) ? null : "localIDs " + ids + ", not " + want;
    });
    check("BlockInputStream over the CRC32 block (checksums verified)", () -> {
      if (w[0] == null) {
        return "no block written";
      }
      OzoneClientConfig cfg = conf.getObject(OzoneClientConfig.class);
      cfg.setChecksumVerify(true);
      try (XceiverClientCreator factory = new XceiverClientCreator(conf);
           BlockInputStream in = new BlockInputStream(w[0].id, w[0].data.length, pipeline, null,
               factory, cfg)) {
        byte[] back = new byte[w[0].data.length];
        int off = 0;
        while (off < back.length) {
          int n = in.read(back, off, Math.min(100_003, back.length - off));
          if (n < 0) {
            return "EOF at " + off;
          }
          off += n;
        }
        return Arrays.equals(back, w[0].data) ? null : "data differs";
      }
    });
    check("GetCommittedBlockLength", () -> {
      if (w[0] == null) {
        return "no block written";
      }
      ContainerProtos.GetCommittedBlockLengthResponseProto r =
          ContainerProtocolCalls.getCommittedBlockLength(client, w[0].id, null);
      if (r.getBlockLength() != w[0].data.length) {
        return "blockLength " + r.getBlockLength() + ", not " + w[0].data.length;
      }
      if (r.getBlockID().getLocalID() != w[0].id.getLocalID()) {
        return "blockID " + r.getBlockID();
      }
      return null;
    });
    check("GetCommittedBlockLength of a block never put is NO_SUCH_BLOCK", () -> {
      try {
        ContainerProtocolCalls.getCommittedBlockLength(client, new BlockID(c, 999), null);
        return "succeeded";
      } catch (IOException e) {
        StorageContainerException sce = findSce(e);
        return sce != null && sce.getResult() == ContainerProtos.Result.NO_SUCH_BLOCK
            ? null : describe(e);
      }
    });

    byte[] small = randomBytes(100_000);
    BlockID smallId = new BlockID(c, 103);
    check("PutSmallFile (writeSmallFile)", () -> {
      ContainerProtos.PutSmallFileResponseProto r =
          ContainerProtocolCalls.writeSmallFile(client, smallId, small, null);
      if (r.getCommittedBlockLength().getBlockLength() != small.length) {
        return "committedBlockLength " + r.getCommittedBlockLength().getBlockLength();
      }
      return null;
    });
    check("GetSmallFile (readSmallFile, checksum verified)", () -> {
      ContainerProtos.GetSmallFileResponseProto r =
          ContainerProtocolCalls.readSmallFile(client, smallId, null);
      ReadChunkResponseProto rc = r.getData();
      byte[] data = concat(rc);
      String d = compareBytes(small, 0, data);
      if (d != null || data.length != small.length) {
        return d != null ? d : "read " + data.length + " bytes";
      }
      ChecksumData cd = ChecksumData.getFromProtoBuf(rc.getChunkData().getChecksumData());
      if (cd.getChecksumType() != ChecksumType.CRC32 || cd.getBytesPerChecksum() != 256) {
        return "chunk's checksum is " + cd.getChecksumType() + "/" + cd.getBytesPerChecksum();
      }
      Checksum.verifyChecksum(rc.hasData() ? Collections.singletonList(rc.getData())
          : rc.getDataBuffers().getBuffersList(), cd, 0);
      return null;
    });

    if (bigBlockMb > 0) {
      streamBlock(blockContainer, 201, bigBlockMb, pipeline, false, (long) bigBlockMb << 20);
    }

    check("CloseContainer " + c, () -> {
      ContainerProtocolCalls.closeContainer(client, c, null);
      ContainerProtos.ReadContainerResponseProto rc =
          ContainerProtocolCalls.readContainer(client, c, null);
      if (rc.getContainerData().getState() != ContainerProtos.ContainerDataProto.State.CLOSED) {
        return "readContainer says " + rc.getContainerData().getState();
      }
      return null;
    });
    // On the wire CLOSED_CONTAINER_IO (KeyValueHandler.checkContainerOpen); the client's
    // validateContainerResponse turns it into ContainerNotOpenException, whose own result is
    // CONTAINER_NOT_OPEN. Both are checked.
    check("WriteChunk to the closed container is CLOSED_CONTAINER_IO", () -> {
      BlockID id = new BlockID(c, 104);
      byte[] data = randomBytes(4096);
      ChunkInfo chunk = ChunkInfo.newBuilder()
          .setChunkName(id.getLocalID() + "_chunk_1").setOffset(0).setLen(data.length)
          .setChecksumData(new Checksum(ChecksumType.CRC32, 1024).computeChecksum(data)
              .getProtoBufMessage())
          .build();
      ContainerCommandResponseProto r = ContainerProtocolCalls.writeChunkAsync(client, chunk, id,
          ByteString.copyFrom(data), null, 0, null, false).getResponse().get();
      if (r.getResult() != ContainerProtos.Result.CLOSED_CONTAINER_IO) {
        return "result " + r.getResult() + " (" + r.getMessage() + ")";
      }
      try {
        ok(r);
        return "validateContainerResponse accepted it";
      } catch (ContainerNotOpenException e) {
        return null;
      }
    });
    check("GetBlock from the closed container still works", () -> {
      if (w[0] == null) {
        return "no block written";
      }
      BlockData bd = ContainerProtocolCalls.getBlock(client, w[0].id, null, Collections.emptyMap())
          .getBlockData();
      return bd.getSize() == w[0].data.length ? null : "size " + bd.getSize();
    });
  }

  /**
   * One block through Ozone's stream classes, written over this check's pipeline and read back
   * over {@code readVia} (a STANDALONE pipeline: {@code BlockInputStream} reads over gRPC).
   *
   * <p>Over STANDALONE it is {@code BlockOutputStream} itself, over {@code XceiverClientGrpc}
   * (what {@code XceiverClientCreator} gives for the pipeline): it has no commit watcher (the base
   * class's {@code watchForCommit} is a no-op), no buffer is ever released, so the pool must hold
   * the whole block. Over RATIS it is {@code RatisBlockOutputStream} over
   * {@code XceiverClientRatis}, as an Ozone key write uses: its {@code CommitWatcher} watches the
   * PutBlocks' log indexes and frees their buffers, so a pool smaller than the block suffices.
   */
  private void streamBlock(long container, long localId, int mb, Pipeline readVia, boolean ratis,
      long bufferMax) {
    long size = (long) mb << 20;
    BlockID id = new BlockID(container, localId);
    byte[] data = randomBytes((int) size);
    OzoneClientConfig cfg = conf.getObject(OzoneClientConfig.class);
    cfg.setChecksumType(ChecksumType.CRC32C);
    cfg.setBytesPerChecksum(16 << 10);
    cfg.setStreamBufferSize(4 << 20);
    cfg.setStreamBufferFlushSize(16L << 20);
    cfg.setStreamBufferMaxSize(Math.max(bufferMax, 16L << 20));
    cfg.setChecksumVerify(true);
    ReplicationConfig rc = pipeline.getReplicationConfig();
    StreamBufferArgs args = StreamBufferArgs.getDefaultStreamBufferArgs(rc, cfg);
    String name = (ratis ? "Ratis: RatisBlockOutputStream " : "BlockOutputStream ") + mb
        + " MB (CRC32C" + (ratis ? ", " + (cfg.getStreamBufferMaxSize() >> 20) + " MB of buffers)" : ")");
    boolean written = check(name, () -> {
      ExecutorService exec = Executors.newSingleThreadExecutor();
      try (XceiverClientCreator factory = new XceiverClientCreator(conf)) {
        int buffers = (int) (cfg.getStreamBufferMaxSize() / cfg.getStreamBufferSize());
        BufferPool pool = new BufferPool(cfg.getStreamBufferSize(), buffers);
        BlockOutputStream out = ratis
            ? new RatisBlockOutputStream(id, size, factory, pipeline, pool, cfg, null,
                ContainerClientMetrics.acquire(), args, () -> exec)
            : new BlockOutputStream(id, size, factory, pipeline, pool, cfg, null,
                ContainerClientMetrics.acquire(), args, () -> exec);
        int off = 0;
        // Uneven writes, so buffers and chunks do not line up with the calls.
        int step = (3 << 20) + 12345;
        while (off < data.length) {
          int n = Math.min(step, data.length - off);
          out.write(data, off, n);
          off += n;
        }
        out.close();
        if (out.getWrittenDataLength() != size) {
          return "wrote " + out.getWrittenDataLength();
        }
        // Every byte acknowledged as committed: the watches covered the last PutBlock.
        if (ratis && out.getTotalAckDataLength() != size) {
          return "committed (acknowledged) " + out.getTotalAckDataLength() + " of " + size + " bytes";
        }
      } finally {
        exec.shutdownNow();
        ContainerClientMetrics.release();
      }
      BlockData bd = ContainerProtocolCalls.getBlock(client, id, null, Collections.emptyMap())
          .getBlockData();
      if (bd.getSize() != size) {
        return "GetBlock says size " + bd.getSize();
      }
      return null;
    });
    if (!written) {
      return;
    }
    check((ratis ? "Ratis: " : "") + "BlockInputStream " + mb + " MB (checksums verified)", () -> {
      try (XceiverClientCreator factory = new XceiverClientCreator(conf);
           BlockInputStream in = new BlockInputStream(id, size, readVia, null, factory, cfg)) {
        byte[] back = new byte[data.length];
        int off = 0;
        int step = (1 << 20) + 777;
        while (off < back.length) {
          int n = in.read(back, off, Math.min(step, back.length - off));
          if (n < 0) {
            return "EOF at " + off;
          }
          off += n;
        }
        if (in.read() != -1) {
          return "more than " + size + " bytes";
        }
        if (!Arrays.equals(back, data)) {
          return "data differs";
        }
        // A seek back into the middle, as a positioned read does.
        long pos = size / 2 + 5;
        in.seek(pos);
        byte[] part = new byte[100_000];
        int n = in.read(part, 0, part.length);
        if (n <= 0 || !Arrays.equals(Arrays.copyOf(part, n),
            Arrays.copyOfRange(data, (int) pos, (int) pos + n))) {
          return "after seek to " + pos + ": data differs";
        }
      }
      return null;
    });
  }
}
