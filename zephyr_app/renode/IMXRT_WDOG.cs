// copapy's model of the i.MX RT watchdog (WDOG1/WDOG2, "WDOG01" in NXP's SDK) for Renode 1.15,
// whose i.MX RT description maps these registers to a Python stub that never expires. Only what
// the teensy41 firmware's watchdog (zephyr_app/src/watchdog.c, Zephyr's nxp,imx-wdog driver)
// uses: WCR.WDE starts it, WCR.WT sets the timeout ((WT + 1) x 0.5 s), the service sequence
// 0x5555, 0xAAAA in WSR reloads it, and its expiry resets the SoC (the whole machine, as the
// RT1062's WDOG_B-less timeout reset does; memories keep their contents). WRSR.TOUT reports a
// timeout reset to the firmware after it, as the silicon does. No warning interrupt (WICR), no
// power-down counter (WMCR): the firmware does not use them.
//
// Loaded by the monitor before the platform description (`include @IMXRT_WDOG.cs`); the tests
// do it (tests/support/zephyr_runners.py, docs/zephyr.md "Running it on Renode").
using Antmicro.Renode.Core;
using Antmicro.Renode.Core.Structure.Registers;
using Antmicro.Renode.Logging;
using Antmicro.Renode.Peripherals.Bus;
using Antmicro.Renode.Time;

namespace Antmicro.Renode.Peripherals.Timers
{
    [AllowedTranslations(AllowedTranslation.ByteToWord | AllowedTranslation.DoubleWordToWord)]
    public class IMXRT_WDOG : BasicWordPeripheral, IKnownSize
    {
        public IMXRT_WDOG(IMachine machine) : base(machine)
        {
            // two counts a second: the timeout is (WT + 1) half-seconds
            timer = new LimitTimer(machine.ClockSource, 2, this, "WDOG", 1, Direction.Descending,
                                   enabled: false, workMode: WorkMode.OneShot, eventEnabled: true);
            timer.LimitReached += Expired;
            DefineRegisters();
            Reset();
        }

        public override void Reset()
        {
            base.Reset();
            timer.Reset();
            serviceArmed = false;
            // WRSR survives the reset it reports (timeoutReset is not cleared here)
        }

        public long Size => 0x10;

        private void DefineRegisters()
        {
            Registers.Control.Define(this, 0x30)
                .WithFlag(0, name: "WDZST")
                .WithFlag(1, name: "WDBG")
                .WithFlag(2, out enabled, name: "WDE")
                .WithFlag(3, name: "WDT")
                .WithFlag(4, name: "SRS")
                .WithFlag(5, name: "WDA")
                .WithFlag(6, name: "SRE")
                .WithFlag(7, name: "WDW")
                .WithValueField(8, 8, out timeout, name: "WT")
                .WithWriteCallback((_, __) =>
                {
                    // WDE is write-once: it starts the count, with the WT written alongside
                    if(enabled.Value && !timer.Enabled)
                    {
                        Reload();
                        timer.Enabled = true;
                    }
                });

            Registers.Service.Define(this)
                .WithValueField(0, 16, FieldMode.Write, name: "WSP", writeCallback: (_, value) =>
                {
                    if(value == 0x5555)
                    {
                        serviceArmed = true;
                    }
                    else if(value == 0xAAAA && serviceArmed)
                    {
                        serviceArmed = false;
                        Reload();
                    }
                    else
                    {
                        serviceArmed = false;
                    }
                });

            Registers.ResetStatus.Define(this)
                .WithFlag(0, FieldMode.Read, name: "SFTW", valueProviderCallback: _ => false)
                .WithFlag(1, FieldMode.Read, name: "TOUT", valueProviderCallback: _ => timeoutReset)
                .WithReservedBits(2, 2)
                .WithFlag(4, FieldMode.Read, name: "POR", valueProviderCallback: _ => !timeoutReset)
                .WithReservedBits(5, 11);

            Registers.InterruptControl.Define(this, 0x4)
                .WithValueField(0, 8, name: "WICT")
                .WithReservedBits(8, 6)
                .WithFlag(14, FieldMode.Read | FieldMode.WriteOneToClear, name: "WTIS")
                .WithFlag(15, name: "WIE");

            Registers.MiscControl.Define(this, 0x1)
                .WithFlag(0, name: "PDE")
                .WithReservedBits(1, 15);
        }

        private void Reload()
        {
            timer.Limit = timeout.Value + 1;
            timer.ResetValue(); // counts down from the limit again
        }

        private void Expired()
        {
            if(!enabled.Value)
            {
                return;
            }
            this.Log(LogLevel.Warning, "watchdog timeout ({0} s): resetting the SoC",
                     (timeout.Value + 1) / 2.0);
            timeoutReset = true;
            machine.RequestReset();
        }

        private readonly LimitTimer timer;
        private IFlagRegisterField enabled;
        private IValueRegisterField timeout;
        private bool serviceArmed;
        private bool timeoutReset;

        private enum Registers
        {
            Control = 0x0,
            Service = 0x2,
            ResetStatus = 0x4,
            InterruptControl = 0x6,
            MiscControl = 0x8,
        }
    }
}
