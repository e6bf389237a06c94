package io.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/** InterruptMeasureTest with virtual threads (DLOCK_JAVA_INTERRUPT_MEASURE=1, JDK 21+). */
@EnabledIfEnvironmentVariable(named = "DLOCK_JAVA_INTERRUPT_MEASURE", matches = "1")
class InterruptMeasureVirtualTest {
  @Test
  @Timeout(value = 30, unit = TimeUnit.MINUTES)
  void virtualThreads() throws Exception {
    assertEquals(0, InterruptMeasureTest.measure("virtual", r -> Thread.ofVirtual().unstarted(r)));
  }
}
