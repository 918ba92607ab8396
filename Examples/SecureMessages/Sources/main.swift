// Example notification service extension: end-to-end encrypted alerts (the class is in
// Examples/ServiceExtensions, shared with Examples/SampleService). Recipe:
// docs/service-extensions.md.
import ExampleServiceExtensions
import UserNotifications

UNNotificationServiceExtensionMain(SecureMessageService.self)
