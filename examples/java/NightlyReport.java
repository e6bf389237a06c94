// The article's cron pattern in Java: every instance of a service fires the same scheduled job
// at the same moment; the dlock lease makes exactly one of them run it, the others skip.
//
//   java -cp dlock-1.0.0.jar NightlyReport.java mysql://app@db:3306/app instance-1 [START_AT_EPOCH_MS]
//
// run.sh starts three instances against a throwaway MariaDB and checks that one ran the job.
import io.dlock.DLock;
import io.dlock.DLockClient;
import java.util.Map;

public class NightlyReport {
  public static void main(String[] args) throws Exception {
    String url = args[0];
    String instance = args[1];
    long startAt = args.length > 2 ? Long.parseLong(args[2]) : System.currentTimeMillis();

    try (DLockClient client = DLockClient.open(url);
        // A lease renewed by the library while the job runs; a stuck job loses it after 5 min.
        DLock lock =
            client.newLock(
                "job:nightly-report",
                Map.of("ttl_ms", "10000", "auto_renew", "1", "max_hold_ms", "300000"))) {
      Thread.sleep(Math.max(0, startAt - System.currentTimeMillis())); // "cron fires"
      if (!lock.tryLock()) {
        System.out.println(instance + ": skipped, another instance runs job:nightly-report");
        return;
      }
      try {
        lock.onLost(() -> System.out.println(instance + ": lost the lock, the job must stop"));
        // Pass the fencing token with every write the job makes, so that a write from an
        // instance that was paused past its lease is refused.
        System.out.println(instance + ": running job:nightly-report, fencing token " + lock.token());
        Thread.sleep(1500); // the job
        System.out.println(instance + ": done");
      } finally {
        lock.unlock();
      }
    }
  }
}
