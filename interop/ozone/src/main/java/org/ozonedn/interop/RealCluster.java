package org.ozonedn.interop;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.hdds.conf.OzoneConfiguration;
import org.apache.hadoop.hdds.protocol.DatanodeDetails;
import org.apache.hadoop.hdds.scm.container.placement.metrics.SCMNodeStat;
import org.apache.hadoop.hdds.scm.node.DatanodeInfo;
import org.apache.hadoop.hdds.scm.node.NodeManager;
import org.apache.hadoop.hdds.scm.node.NodeStatus;
import org.apache.hadoop.ozone.MiniOzoneCluster;

/**
 * OM and SCM in this JVM (MiniOzoneCluster, security off, safe mode off), with no DataNode unless
 * {@code --datanodes K} adds real ones: the cluster simulated DataNodes register with.
 *
 * <p>Prints on stdout, once SCM and OM serve: {@code om ADDR} (OM's client RPC address),
 * {@code nodes URL} (this harness's node list, below) and last {@code scm ADDR} (SCM's DataNode
 * port, {@code ozone.scm.datanode.address}: what a DataNode's {@code ozone.scm.names} points at).
 * Everything else goes to stderr. Serves until SIGTERM or until stdin closes; its data lives in a
 * temporary directory removed on exit.
 *
 * <p>{@code GET URL} answers one line per DataNode SCM knows, sorted by host then UUID:
 * {@code UUID HOSTNAME IP OPERATIONAL_STATE HEALTH capacity=BYTES used=BYTES remaining=BYTES
 * committed=BYTES heartbeat_age_ms=MS}, read from SCM's node manager (the states and usage
 * `ozone admin datanode list` and `ozone admin datanode usageinfo` show; the age of the last
 * heartbeat SCM took).
 *
 * <p>Arguments: {@code --datanodes K} (real DataNodes to start beside, default 0),
 * {@code --conf-out FILE} (the cluster's configuration as Hadoop XML, for `ozone` commands and
 * freon in other JVMs), {@code -D key=value} (any Ozone key, for the whole cluster).
 */
public final class RealCluster {

  private static final long SHUTDOWN_LIMIT_MS = 30_000;

  private RealCluster() {
  }

  public static void main(String[] args) throws Exception {
    Args parsed;
    try {
      parsed = Args.parse(args);
    } catch (IllegalArgumentException e) {
      System.err.println("real-cluster: " + e.getMessage());
      System.exit(2);
      return;
    }
    try {
      serve(parsed);
    } catch (Throwable t) {
      System.err.println("real-cluster: failed: " + t);
      t.printStackTrace();
      Throwable root = t;
      while (root.getCause() != null && root.getCause() != root) {
        root = root.getCause();
      }
      System.err.flush();
      System.err.println("real-cluster: failed, root cause: " + root);
      System.exit(1);
    }
  }

  private static void serve(Args parsed) throws Exception {
    PrintStream stdout = System.out;
    System.setOut(System.err);

    Path base = Files.createTempDirectory("real-cluster-");
    System.setProperty("test.build.data", base.toString());

    OzoneConfiguration conf = new OzoneConfiguration();
    // Volumes of real DataNodes (--datanodes) report a fixed 512 GiB (see RealDatanode).
    conf.set("hdds.datanode.du.factory.classname", LabSpaceUsage.class.getName());
    // OM's gRPC port is fixed (8981) unless set: any free one (see RealDatanode).
    conf.setInt("ozone.om.grpc.port", RealDatanode.ephemeralPort());
    // Loopback only: the HTTP servers and the other listeners that have a bind-host key
    // (MiniOzoneCluster already binds SCM's RPC servers to 127.0.0.1).
    for (String key : new String[] {"ozone.om.http-bind-host", "ozone.om.https-bind-host",
        "ozone.scm.http-bind-host", "ozone.scm.https-bind-host",
        "ozone.scm.security.service.bind.host", "hdds.datanode.http-bind-host",
        "hdds.datanode.https-bind-host", "hdds.datanode.client.bind.host"}) {
      conf.set(key, "127.0.0.1");
    }
    for (Map.Entry<String, String> e : parsed.defines.entrySet()) {
      conf.set(e.getKey(), e.getValue());
    }

    RealDatanode.claimPortRange();
    long started = System.nanoTime();
    MiniOzoneCluster.Builder builder = MiniOzoneCluster.newBuilder(conf);
    if (parsed.datanodes == 0) {
      // No DataNode, safe mode off (MiniOzoneCluster's own recipe).
      builder.withoutDatanodes();
    } else {
      builder.setNumDatanodes(parsed.datanodes);
      // Simulated DataNodes come later: safe mode must not wait for them.
      conf.setBoolean("hdds.scm.safemode.enabled", false);
    }
    MiniOzoneCluster cluster;
    try {
      cluster = builder.build();
    } catch (Exception e) {
      RealDatanode.deleteTree(base);
      throw e;
    }
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      Thread watchdog = new Thread(() -> {
        try {
          Thread.sleep(SHUTDOWN_LIMIT_MS);
        } catch (InterruptedException e) {
          return;
        }
        System.err.println("real-cluster: shutdown took over " + SHUTDOWN_LIMIT_MS / 1000
            + " s; halting");
        RealDatanode.deleteTree(base);
        Runtime.getRuntime().halt(1);
      }, "real-cluster-shutdown-watchdog");
      watchdog.setDaemon(true);
      watchdog.start();
      try {
        cluster.shutdown();
      } catch (RuntimeException e) {
        System.err.println("real-cluster: shutdown: " + e);
      }
      RealDatanode.deleteTree(base);
    }, "real-cluster-shutdown"));

    if (parsed.datanodes > 0) {
      cluster.waitForClusterToBeReady();
    }

    OzoneConfiguration clusterConf = cluster.getConf();
    String scm = loopback(clusterConf.get("ozone.scm.datanode.address"));
    String om = loopback(clusterConf.get("ozone.om.address"));

    NodeManager nodes = cluster.getStorageContainerManager().getScmNodeManager();
    HttpServer http = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    http.createContext("/nodes", exchange -> {
      byte[] body;
      try {
        body = nodeList(nodes).getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
        exchange.sendResponseHeaders(200, body.length);
      } catch (RuntimeException e) {
        body = (e + "\n").getBytes(StandardCharsets.UTF_8);
        exchange.sendResponseHeaders(500, body.length);
      }
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    });
    // GET /allocate?replication=rs-3-2-1024k (EC) or RATIS/ONE, RATIS/THREE: a container
    // allocated through SCM's client protocol, as `ozone admin container create` would;
    // answers `container ID pipeline UUID nodes UUID,UUID,...`.
    http.createContext("/allocate", exchange -> {
      String query = exchange.getRequestURI().getQuery();
      String spec = query != null && query.startsWith("replication=")
          ? query.substring("replication=".length()) : "RATIS/ONE";
      byte[] body;
      int status = 200;
      try {
        body = allocate(cluster, spec).getBytes(StandardCharsets.UTF_8);
      } catch (Exception e) {
        status = 500;
        body = (e + "\n").getBytes(StandardCharsets.UTF_8);
      }
      exchange.sendResponseHeaders(status, body.length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    });
    http.start();
    String nodesUrl = "http://127.0.0.1:" + http.getAddress().getPort() + "/nodes";

    if (parsed.confOut != null) {
      Path tmp = Paths.get(parsed.confOut + ".tmp");
      try (OutputStream out = Files.newOutputStream(tmp)) {
        clusterConf.writeXml(out);
      }
      Files.move(tmp, Paths.get(parsed.confOut), StandardCopyOption.ATOMIC_MOVE);
    }
    System.err.printf("real-cluster: Ozone %s OM %s, SCM %s (DataNode port), %d real DataNodes,"
            + " ready after %.1f s%n",
        org.apache.hadoop.ozone.util.OzoneVersionInfo.OZONE_VERSION_INFO.getVersion(), om, scm,
        parsed.datanodes, (System.nanoTime() - started) / 1e9);
    // `scm` last: a reader that has it has the others.
    stdout.println("om " + om);
    stdout.println("nodes " + nodesUrl);
    stdout.println("scm " + scm);
    stdout.flush();

    while (System.in.read() != -1) {
      // the input is ignored
    }
    System.exit(0);
  }

  /** HOST:PORT → 127.0.0.1:PORT (MiniOzoneCluster binds SCM and OM to loopback). */
  private static String loopback(String hostPort) {
    if (hostPort == null || hostPort.lastIndexOf(':') < 0) {
      throw new IllegalStateException("no port in address '" + hostPort + "'");
    }
    return "127.0.0.1" + hostPort.substring(hostPort.lastIndexOf(':'));
  }

  static String allocate(MiniOzoneCluster cluster, String spec) throws IOException {
    org.apache.hadoop.hdds.client.ReplicationConfig config;
    if (spec.startsWith("RATIS/")) {
      config = org.apache.hadoop.hdds.client.RatisReplicationConfig.getInstance(
          org.apache.hadoop.hdds.protocol.proto.HddsProtos.ReplicationFactor.valueOf(
              spec.substring("RATIS/".length())));
    } else {
      config = new org.apache.hadoop.hdds.client.ECReplicationConfig(spec);
    }
    org.apache.hadoop.hdds.scm.container.common.helpers.ContainerWithPipeline c =
        cluster.getStorageContainerLocationClient().allocateContainer(config, "ozone-dn-lab");
    StringBuilder nodes = new StringBuilder();
    for (DatanodeDetails dn : c.getPipeline().getNodes()) {
      nodes.append(nodes.length() == 0 ? "" : ",").append(dn.getUuidString());
    }
    return "container " + c.getContainerInfo().getContainerID() + " pipeline "
        + c.getPipeline().getId().getId() + " nodes " + nodes + "\n";
  }

  static String nodeList(NodeManager nodes) {
    List<DatanodeDetails> all = new ArrayList<>(nodes.getAllNodes());
    all.sort(Comparator.comparing(DatanodeDetails::getHostName)
        .thenComparing(DatanodeDetails::getUuidString));
    StringBuilder out = new StringBuilder();
    for (DatanodeDetails dn : all) {
      String op;
      String health;
      try {
        NodeStatus status = nodes.getNodeStatus(dn);
        op = status.getOperationalState().name();
        health = status.getHealth().name();
      } catch (Exception e) {
        op = "UNKNOWN";
        health = "UNKNOWN";
      }
      SCMNodeStat stat = nodes.getNodeStat(dn) == null ? null : nodes.getNodeStat(dn).get();
      out.append(dn.getUuidString()).append(' ')
          .append(dn.getHostName()).append(' ')
          .append(dn.getIpAddress()).append(' ')
          .append(op).append(' ')
          .append(health)
          .append(" capacity=").append(stat == null ? 0 : stat.getCapacity().get())
          .append(" used=").append(stat == null ? 0 : stat.getScmUsed().get())
          .append(" remaining=").append(stat == null ? 0 : stat.getRemaining().get())
          .append(" committed=").append(stat == null ? 0 : stat.getCommitted().get())
          .append(" heartbeat_age_ms=").append(dn instanceof DatanodeInfo
              ? org.apache.hadoop.util.Time.monotonicNow()
                  - ((DatanodeInfo) dn).getLastHeartbeatTime() : -1)
          .append('\n');
    }
    return out.toString();
  }

  /** The command line. */
  static final class Args {
    final Map<String, String> defines = new LinkedHashMap<>();
    int datanodes;
    String confOut;

    static Args parse(String[] argv) {
      Args a = new Args();
      for (int i = 0; i < argv.length; i++) {
        String arg = argv[i];
        switch (arg) {
          case "--datanodes":
            String k = value(argv, ++i, arg);
            try {
              a.datanodes = Integer.parseInt(k);
            } catch (NumberFormatException e) {
              throw new IllegalArgumentException("--datanodes: not a number: '" + k + "'");
            }
            if (a.datanodes < 0 || a.datanodes > 20) {
              throw new IllegalArgumentException("--datanodes: 0 to 20, got " + k);
            }
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
  }
}
