import Foundation

/// The manual page, generated from the same command specs as `tagfix help`: docs/tagfix.1 is this
/// text (a test keeps it so); regenerate it with `tagfix help --man > docs/tagfix.1`.
enum ManPage {
    static func render() -> String {
        var roff = """
            .TH TAGFIX 1 "" "tagfix \(TagFixCommandLine.version)" "User Commands"
            .SH NAME
            tagfix \\- confirm NFC tag placements against live GPS
            .SH SYNOPSIS
            .B tagfix
            .I COMMAND
            [\\fIoptions\\fR]
            .SH DESCRIPTION
            For every tap of an NFC tag on a reader, tagfix decides in real time whether the scan
            happened inside the tag's expected region (a circle of up to 500 m, from a registry of
            placements or from the tag's URL): confirmed, outside (the tag moved), inconclusive (the
            fix is too poor or too old), not registered, or disallowed. Readers are driven through
            libnfc, GPS through gpsd; emulators stand in for both.

            """
        for command in TagFixCommandLine.subcommands.map({ $0.spec }) {
            roff += ".SH \(escape(command.name.uppercased()))\n.B tagfix \(escape(command.name))\n"
            roff += command.positionals.map { $0.optional ? "[\\fI\(escape($0.name))\\fR]" : "\\fI\(escape($0.name))\\fR" }.joined(
                separator: " ")
            roff += (command.positionals.isEmpty ? "" : "\n") + "[\\fIoptions\\fR]\n.PP\n\(escape(command.abstract))\n"
            if !command.discussion.isEmpty { roff += ".PP\n\(escape(command.discussion))\n" }
            for positional in command.positionals { roff += ".TP\n.I \(escape(positional.name))\n\(escape(positional.help))\n" }
            for option in command.options {
                roff +=
                    ".TP\n.B \\-\\-\(escape(option.name))\(option.valueName.map { " \\fI\(escape($0))\\fR" } ?? "")\n\(escape(option.help))\n"
            }
            if !command.examples.isEmpty {
                roff += ".PP\nExamples:\n.RS\n.nf\n" + command.examples.map { escape($0) + "\n" }.joined() + ".fi\n.RE\n"
            }
        }
        roff += """
            .SH EXIT STATUS
            .TP
            .B 0
            success (verdicts of every kind are a success: they are the output)
            .TP
            .B 64
            usage error: an unknown command or option, a missing or bad value
            .TP
            .B 65
            a malformed input file (scenario, registry, tag dump, session log), or a registry conflict
            .TP
            .B 66
            an input file is missing or unreadable
            .TP
            .B 69
            a device or service is unavailable (reader, gpsd, pty), a tag cannot be written, or doctor found a blocking problem
            .TP
            .B 70
            an internal error (a bug: an error of a kind the command does not expect): please report it
            .TP
            .B 74
            an output file (report, session log, registry) could not be written
            .TP
            .B 75
            not done now, try again: a \\-\\-timeout passed, the registry was locked, or enroll refused the GPS average
            .SH ENVIRONMENT
            .TP
            .B TAGFIX_REGISTRY
            the SQLite registry (or postgresql://…) when \\-\\-registry is not given
            .TP
            .B PGPASSFILE
            libpq's password file, for a postgresql:// \\-\\-db, \\-\\-state or \\-\\-registry given no \\-\\-db\\-password\\-file
            .TP
            .B LIBNFC_DEVICE
            libnfc's default reader, e.g. pn532_uart:/dev/ttyUSB0
            .TP
            .B TAGFIX_LOG_LEVEL
            debug logs each read's commands and bytes
            .TP
            .B NO_COLOR
            no colours on a terminal
            .SH FILES
            .TP
            .I udev/60-tagfix.rules, udev/blacklist-libnfc.conf
            device permissions and the kernel module blacklist (udev/install.sh)
            .SH SEE ALSO
            .BR nfc-list (1),
            .BR gpsd (8),
            .BR gpspipe (1)

            """
        return roff
    }

    /// Backslashes, leading dots and quotes, as roff wants them.
    static func escape(_ text: String) -> String {
        var out = text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
        if out.hasPrefix(".") || out.hasPrefix("'") { out = "\\&" + out }
        return out.replacingOccurrences(of: "\n.", with: "\n\\&.")
    }
}
