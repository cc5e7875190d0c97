package org.ozonedn.interop;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.apache.hadoop.hdds.HddsConfigKeys;
import org.apache.hadoop.hdds.conf.OzoneConfiguration;
import org.apache.hadoop.hdds.protocol.DatanodeDetails;
import org.apache.hadoop.hdds.protocol.proto.HddsProtos;
import org.apache.hadoop.hdds.scm.XceiverClientManager;
import org.apache.hadoop.hdds.scm.XceiverClientSpi;
import org.apache.hadoop.hdds.scm.container.common.helpers.ContainerWithPipeline;
import org.apache.hadoop.hdds.scm.protocolPB.StorageContainerLocationProtocolClientSideTranslatorPB;
import org.apache.hadoop.hdds.scm.storage.ContainerProtocolCalls;
import org.apache.hadoop.ozone.HddsDatanodeService;
import org.apache.hadoop.ozone.MiniOzoneCluster;

/**
 * A real Apache Ozone DataNode on demand: SCM, OM and one DataNode in this JVM (MiniOzoneCluster,
 * security, tokens and TLS off as by default), the requested containers allocated through SCM and
 * created on the DataNode over its Ratis pipeline, as a client's first write would.
 *
 * <p>Prints exactly one line {@code datanode 127.0.0.1:PORT} on stdout (the DataNode's client port,
 * XceiverServerGrpc) once it can serve; everything else goes to stderr. Serves until SIGTERM or until
 * stdin closes; its data lives in a temporary directory removed on exit.
 *
 * <p>Arguments: {@code --containers LIST} (IDs and ranges, e.g. {@code 1-100,200}; SCM hands out IDs
 * 1, 2, 3, … so the highest ID decides how many are allocated), {@code --info FILE} (also writes
 * {@code datanode}, {@code uuid} and {@code http} lines there), {@code --conf-out FILE} (the
 * cluster's configuration as Hadoop XML, for Ozone tools in other JVMs), {@code -D key=value} (any Ozone key,
 * applied to the whole cluster and so to the DataNode).
 */
public final class RealDatanode {

  /** How long a shutdown may take before the JVM halts. */
  private static final long SHUTDOWN_LIMIT_MS = 30_000;

  private RealDatanode() {
  }

  public static void main(String[] args) throws Exception {
    Args parsed;
    try {
      parsed = Args.parse(args);
    } catch (IllegalArgumentException e) {
      System.err.println("real-datanode: " + e.getMessage());
      System.exit(2);
      return;
    }
    try {
      serve(parsed);
    } catch (Throwable t) {
      // Ozone's non-daemon threads would keep the JVM alive: a harness that cannot start says so
      // and exits, rather than hang without its line.
      System.err.println("real-datanode: failed: " + t);
      t.printStackTrace();
      // The innermost cause last (after the cluster's shutdown noise), where a log's tail shows it.
      Throwable root = t;
      while (root.getCause() != null && root.getCause() != root) {
        root = root.getCause();
      }
      System.err.flush();
      System.err.println("real-datanode: failed, root cause: " + root);
      System.exit(1);
    }
  }

  private static void serve(Args parsed) throws Exception {
    // Everything Ozone logs goes to stderr; stdout carries the one line callers wait for.
    PrintStream stdout = System.out;
    System.setOut(System.err);

    Path base = Files.createTempDirectory("real-datanode-");
    // MiniOzoneCluster puts its directories under test.build.data.
    System.setProperty("test.build.data", base.toString());

    OzoneConfiguration conf = new OzoneConfiguration();
    // A lab DataNode on a small disk: the DataNode reserves a container's full size of volume
    // space for each open container, so 5 GB containers (the default) would exhaust any disk at a
    // few dozen. Writes are still allowed past it (the DataNode only reports full containers).
    conf.set("ozone.scm.container.size", "64MB");
    conf.set("hdds.datanode.volume.min.free.space", "64MB");
    // Volumes of a fixed 512 GiB (LabSpaceUsage): the reservations of ~300 open containers must
    // not depend on how much of the build machine's disk is free.
    conf.set("hdds.datanode.du.factory.classname", LabSpaceUsage.class.getName());
    conf.set("hdds.scm.safemode.min.datanode", "1");
    conf.set("ozone.scm.pipeline.owner.container.count", "1000");
    // OM's gRPC server (for S3 gateways) binds a fixed port, 8981, which MiniOzoneCluster leaves
    // alone: a second harness on this machine would fail to start on it. Any free port will do
    // (an ephemeral one, outside the range MiniOzoneCluster numbers its own ports in).
    conf.setInt("ozone.om.grpc.port", ephemeralPort());
    for (Map.Entry<String, String> e : parsed.defines.entrySet()) {
      conf.set(e.getKey(), e.getValue());
    }

    claimPortRange();
    long started = System.nanoTime();
    MiniOzoneCluster cluster;
    try {
      cluster = MiniOzoneCluster.newBuilder(conf).setNumDatanodes(1).build();
    } catch (Exception e) {
      deleteTree(base);
      throw e;
    }
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      // A DataNode that ran out of heap (see docs/deviations.md, D1) can hang in its own shutdown:
      // give it a while, then halt, so that a caller's SIGTERM or closed stdin always ends us.
      Thread watchdog = new Thread(() -> {
        try {
          Thread.sleep(SHUTDOWN_LIMIT_MS);
        } catch (InterruptedException e) {
          return;
        }
        System.err.println("real-datanode: shutdown took over " + SHUTDOWN_LIMIT_MS / 1000
            + " s; halting");
        deleteTree(base);
        Runtime.getRuntime().halt(1);
      }, "real-datanode-shutdown-watchdog");
      watchdog.setDaemon(true);
      watchdog.start();
      try {
        cluster.shutdown();
      } catch (RuntimeException e) {
        System.err.println("real-datanode: shutdown: " + e);
      }
      deleteTree(base);
    }, "real-datanode-shutdown"));

    cluster.waitForClusterToBeReady();
    cluster.waitForPipelineTobeReady(HddsProtos.ReplicationFactor.ONE, 120_000);

    HddsDatanodeService dn = cluster.getHddsDatanodes().get(0);
    DatanodeDetails details = dn.getDatanodeDetails();
    int port = details.getStandalonePort().getValue();
    String http = findPrometheusEndpoint(cluster, dn);

    String pipeline = createContainers(cluster, conf, parsed.containers);
    if (pipeline == null) {
      pipeline = cluster.getStorageContainerManager().getPipelineManager()
          .getPipelines(org.apache.hadoop.hdds.client.RatisReplicationConfig.getInstance(
              HddsProtos.ReplicationFactor.ONE))
          .get(0).getId().getId().toString();
    }
    // The Ratis client port (hdds.container.ratis.ipc.port) and the RATIS/ONE pipeline the
    // containers live in: its ID is the Raft group's.
    String ratis = "127.0.0.1:" + details.getPort(DatanodeDetails.Port.Name.RATIS).getValue();
    // Its Ratis admin port (hdds.container.ratis.admin.port): groupList names the pipeline.
    String ratisAdmin =
        "127.0.0.1:" + details.getPort(DatanodeDetails.Port.Name.RATIS_ADMIN).getValue();

    String addr = "127.0.0.1:" + port;
    if (parsed.info != null) {
      List<String> lines = new ArrayList<>();
      lines.add("datanode " + addr);
      lines.add("ratis " + ratis);
      lines.add("ratis-admin " + ratisAdmin);
      lines.add("pipeline " + pipeline);
      lines.add("uuid " + details.getUuidString());
      lines.add("http " + http);
      lines.add("version " + org.apache.hadoop.ozone.util.OzoneVersionInfo.OZONE_VERSION_INFO.getVersion());
      Path tmp = Paths.get(parsed.info + ".tmp");
      Files.write(tmp, lines, StandardCharsets.UTF_8);
      Files.move(tmp, Paths.get(parsed.info), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }
    if (parsed.confOut != null) {
      // The cluster's configuration (SCM's client address above all), for Ozone tools run in
      // other JVMs: `ozone freon ... -conf FILE` finds the containers and pipelines through SCM.
      Path tmp = Paths.get(parsed.confOut + ".tmp");
      try (java.io.OutputStream out = Files.newOutputStream(tmp)) {
        cluster.getConf().writeXml(out);
      }
      Files.move(tmp, Paths.get(parsed.confOut), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }
    System.err.printf("real-datanode: Ozone %s DataNode %s serving on %s (http %s) after %.1f s, %d containers%n",
        org.apache.hadoop.ozone.util.OzoneVersionInfo.OZONE_VERSION_INFO.getVersion(),
        details.getUuidString(), addr, http, (System.nanoTime() - started) / 1e9,
        parsed.containers.size());
    // `datanode` last: a reader that has it has the others.
    stdout.println("ratis " + ratis);
    stdout.println("ratis-admin " + ratisAdmin);
    stdout.println("pipeline " + pipeline);
    stdout.println("datanode " + addr);
    stdout.flush();

    // Serve until stdin closes (the caller went away) or SIGTERM (the shutdown hook).
    while (System.in.read() != -1) {
      // the input is ignored
    }
    System.exit(0);
  }

  /** A port free now, chosen by the kernel. */
  static int ephemeralPort() throws IOException {
    try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  /**
   * Allocates containers through SCM until every requested ID exists, then creates each on the
   * DataNode; returns the ID of their pipeline (null when none was wanted).
   */
  private static String createContainers(MiniOzoneCluster cluster, OzoneConfiguration conf,
      TreeSet<Long> wanted) throws IOException {
    if (wanted.isEmpty()) {
      return null;
    }
    String pipeline = null;
    StorageContainerLocationProtocolClientSideTranslatorPB scm =
        cluster.getStorageContainerLocationClient();
    try (XceiverClientManager clients = new XceiverClientManager(conf)) {
      long highest = wanted.last();
      long id = 0;
      while (id < highest) {
        ContainerWithPipeline c = scm.allocateContainer(HddsProtos.ReplicationType.RATIS,
            HddsProtos.ReplicationFactor.ONE, "ozone-dn-lab");
        id = c.getContainerInfo().getContainerID();
        pipeline = c.getPipeline().getId().getId().toString();
        XceiverClientSpi client = clients.acquireClient(c.getPipeline());
        try {
          ContainerProtocolCalls.createContainer(client, id, null);
        } finally {
          clients.releaseClient(client, false);
        }
      }
    }
    return pipeline;
  }

  /**
   * The HTTP address whose {@code /prom} shows the DataNode's metrics. SCM, OM and the DataNode
   * share this JVM and so one Hadoop metrics system, and its Prometheus sink is registered by the
   * first HTTP server that starts: the DataNode's {@code storage_container_metrics_*} may appear on
   * SCM's or OM's {@code /prom} rather than on the DataNode's own. Probe them all.
   */
  private static String findPrometheusEndpoint(MiniOzoneCluster cluster, HddsDatanodeService dn) {
    List<String> candidates = new ArrayList<>();
    candidates.add(dn.getConf().get(HddsConfigKeys.HDDS_DATANODE_HTTP_ADDRESS_KEY));
    candidates.add(cluster.getConf().get("ozone.scm.http-address"));
    candidates.add(cluster.getConf().get("ozone.om.http-address"));
    // The sink sees a metric only after the metrics system's first snapshot (period 1 s, set in
    // hadoop-metrics2.properties): ask for a while.
    for (int round = 0; round < 30; round++) {
      String found = probePrometheus(candidates);
      if (found != null) {
        return found;
      }
      try {
        Thread.sleep(500);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    System.err.println("real-datanode: no /prom with the DataNode's metrics among " + candidates);
    return "none";
  }

  private static String probePrometheus(List<String> candidates) {
    for (String c : candidates) {
      if (c == null || c.lastIndexOf(':') < 0) {
        continue;
      }
      String addr = "127.0.0.1" + c.substring(c.lastIndexOf(':'));
      try {
        java.net.HttpURLConnection http = (java.net.HttpURLConnection)
            new java.net.URL("http://" + addr + "/prom").openConnection();
        http.setConnectTimeout(2000);
        http.setReadTimeout(5000);
        try (java.io.InputStream in = http.getInputStream()) {
          String body = new String(in.readAllBytes(), StandardCharsets.UTF_8);
          if (body.contains("storage_container_metrics_num_ops")) {
            return addr;
          }
        }
      } catch (IOException e) {
        // not this one
      }
    }
    return null;
  }

  /** Ports the cluster takes (SCM, OM, DataNode, Ratis, HTTP): about 20; keep a margin. */
  private static final int PORTS_NEEDED = 48;

  /**
   * MiniOzoneCluster numbers its ports from 15000 up (GenericTestUtils.PortAllocator) without
   * checking that they are free, so two harnesses at once, or one started right after another, or
   * anything else on 15000-15050 would collide, and the cluster then hangs in its start. Start the
   * allocator at a random base whose whole range is free now.
   */
  static void claimPortRange() {
    java.util.Random random = new java.util.Random();
    int min = org.apache.ozone.test.GenericTestUtils.PortAllocator.MIN_PORT;
    int max = org.apache.ozone.test.GenericTestUtils.PortAllocator.MAX_PORT - PORTS_NEEDED;
    for (int attempt = 0; attempt < 50; attempt++) {
      int base = min + random.nextInt(max - min);
      if (rangeIsFree(base, PORTS_NEEDED)) {
        org.apache.ozone.test.GenericTestUtils.PortAllocator.NEXT_PORT.set(base);
        return;
      }
    }
    System.err.println("real-datanode: found no free range of " + PORTS_NEEDED
        + " ports; using Ozone's default allocation from " + min);
  }

  private static boolean rangeIsFree(int base, int count) {
    for (int port = base; port < base + count; port++) {
      try (java.net.ServerSocket s = new java.net.ServerSocket()) {
        s.setReuseAddress(false);
        s.bind(new java.net.InetSocketAddress(port));
      } catch (IOException e) {
        return false;
      }
    }
    return true;
  }

  static void deleteTree(Path base) {
    try (Stream<Path> paths = Files.walk(base)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      System.err.println("real-datanode: could not remove " + base + ": " + e);
    }
  }

  /** The command line. */
  static final class Args {
    final TreeSet<Long> containers = new TreeSet<>();
    final Map<String, String> defines = new LinkedHashMap<>();
    String info;
    String confOut;

    static Args parse(String[] argv) {
      Args a = new Args();
      a.containers.add(1L);
      for (int i = 0; i < argv.length; i++) {
        String arg = argv[i];
        switch (arg) {
          case "--containers":
            a.containers.clear();
            a.containers.addAll(parseList(value(argv, ++i, arg)));
            break;
          case "--info":
            a.info = value(argv, ++i, arg);
            break;
          case "--conf-out":
            a.confOut = value(argv, ++i, arg);
            break;
          case "-D":
            define(a, value(argv, ++i, arg));
            break;
          default:
            if (arg.startsWith("-D") && arg.length() > 2) {
              define(a, arg.substring(2));
            } else {
              throw new IllegalArgumentException("unknown argument '" + arg + "'");
            }
        }
      }
      return a;
    }

    private static void define(Args a, String kv) {
      int eq = kv.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("-D wants key=value, got '" + kv + "'");
      }
      a.defines.put(kv.substring(0, eq), kv.substring(eq + 1));
    }

    private static String value(String[] argv, int i, String flag) {
      if (i >= argv.length) {
        throw new IllegalArgumentException(flag + " needs a value");
      }
      return argv[i];
    }

    static List<Long> parseList(String list) {
      List<Long> ids = new ArrayList<>();
      for (String part : list.split(",")) {
        String p = part.trim();
        if (p.isEmpty()) {
          continue;
        }
        try {
          int dash = p.indexOf('-');
          if (dash > 0) {
            long from = Long.parseLong(p.substring(0, dash));
            long to = Long.parseLong(p.substring(dash + 1));
            if (from < 1 || to < from || to - from > 100_000) {
              throw new IllegalArgumentException("--containers: bad range '" + p + "'");
            }
            for (long id = from; id <= to; id++) {
              ids.add(id);
            }
          } else {
            long id = Long.parseLong(p);
            if (id < 1) {
              throw new IllegalArgumentException("--containers: IDs start at 1, got '" + p + "'");
            }
            ids.add(id);
          }
        } catch (NumberFormatException e) {
          throw new IllegalArgumentException("--containers: not a list of IDs and ranges: '" + list + "'");
        }
      }
      return ids;
    }
  }
}
